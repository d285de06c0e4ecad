//! Files written whole or not at all, and output paths checked before any work is done.
//!
//! A results, JUnit, perf or report file is written to a temporary file beside its
//! destination and renamed over it, so a reader (or a run killed half-way) never sees half a
//! file. [`check_writable`] runs before a command starts its cases, so a bad `--json` path
//! is refused up front instead of after an hour of work.
//!
//! Only a regular file (or a path that does not exist yet) is replaced that way. Anything else
//! the user names is written *through*, never replaced: a character or block device
//! (`/dev/null`, `/dev/stdout`'s terminal) or a FIFO is opened for writing as it is (no
//! create, no truncate, no rename), so `--json /dev/null` discards the results and a full
//! device (`/dev/full`) gives a "cannot write" error; a symbolic link is followed, and its
//! target is written the same way (a regular target atomically, beside the target, so the
//! link itself stays). A dangling link, a socket or a directory is refused.

use std::io::Write;
use std::path::{Path, PathBuf};

/// What an output path is, as far as writing it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputKind {
    /// Not there yet, or a regular file: written atomically at this path.
    Replace(PathBuf),
    /// A device or FIFO (possibly reached through a symbolic link): written through in place.
    WriteThrough,
}

/// Why a path cannot be written as an output: each variant's `Display` is the user's message,
/// naming the path.
#[derive(Debug, thiserror::Error)]
pub enum OutputPathError {
    /// The path (or its canonical form) cannot be looked at.
    #[error("{}: {error}", path.display())]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A symbolic link whose target does not exist (conform does not create it).
    #[error(
        "{}: a symbolic link whose target cannot be reached ({error}); conform writes through \
         links but does not create their targets",
        path.display()
    )]
    DanglingLink {
        path: PathBuf,
        error: std::io::Error,
    },
    /// An output file named by a directory.
    #[error("{}: is a directory, not a file", .0.display())]
    Directory(PathBuf),
    /// A socket or other node that is neither a regular file, a device nor a FIFO.
    #[error("{}: not a regular file, device or FIFO; conform will not replace it", .0.display())]
    NotReplaceable(PathBuf),
    /// An output directory named by an existing non-directory.
    #[error("{}: exists and is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// The directory an output goes into does not exist.
    #[error("{}: no such directory", .0.display())]
    NoSuchDirectory(PathBuf),
    /// The directory an output goes into cannot be written.
    #[error("{}: not writable: {error}", dir.display())]
    NotWritable { dir: PathBuf, error: std::io::Error },
}

/// How `path` is to be written, or why it cannot be (a directory, a socket, a dangling
/// symbolic link).
pub fn output_kind(path: &Path) -> Result<OutputKind, OutputPathError> {
    let link = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(OutputKind::Replace(path.to_path_buf()));
        }
        Err(error) => {
            return Err(OutputPathError::Unreadable {
                path: path.to_path_buf(),
                error,
            })
        }
    };
    let (meta, at) = if link.file_type().is_symlink() {
        let meta = std::fs::metadata(path).map_err(|error| OutputPathError::DanglingLink {
            path: path.to_path_buf(),
            error,
        })?;
        // A regular target is replaced atomically where it is; the link stays a link.
        let at = if meta.is_file() {
            std::fs::canonicalize(path).map_err(|error| OutputPathError::Unreadable {
                path: path.to_path_buf(),
                error,
            })?
        } else {
            path.to_path_buf()
        };
        (meta, at)
    } else {
        (link, path.to_path_buf())
    };
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok(OutputKind::Replace(at));
    }
    if ft.is_dir() {
        return Err(OutputPathError::Directory(path.to_path_buf()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_char_device() || ft.is_block_device() || ft.is_fifo() {
            return Ok(OutputKind::WriteThrough);
        }
    }
    Err(OutputPathError::NotReplaceable(path.to_path_buf()))
}

/// Writes `bytes` to `path`: atomically (temp file in the same directory, fsync, rename) for
/// a regular file or a new path, through in place for a device or FIFO (see the module
/// documentation). The file gets the permissions a plain write would give it (0666 less the
/// umask), not the owner-only 0600 of a temporary file: results and reports are read by
/// other users (CI artifact uploaders, web servers).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    match output_kind(path).map_err(std::io::Error::other)? {
        OutputKind::Replace(at) => write_replacing(&at, bytes),
        OutputKind::WriteThrough => {
            // No O_CREAT, no O_TRUNC: the node is used as it is, never replaced.
            let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
            f.write_all(bytes)?;
            f.flush()
        }
    }
}

fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = parent_dir(path);
    let mut builder = tempfile::Builder::new();
    builder.prefix(".conform-tmp-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // open(2) applies the umask to this mode, as it does for std::fs::write.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(&dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The path of a file kept beside output `path` (its results journal, say): beside the link's
/// target for a symbolic link to a regular file; None for a device or FIFO, where nothing may
/// be created beside it.
pub fn sidecar_base(path: &Path) -> Option<PathBuf> {
    match output_kind(path) {
        Ok(OutputKind::Replace(at)) => Some(at),
        _ => None,
    }
}

/// The directory a file path lives in (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Why `path` cannot be written as an output *file* (its directory is missing, not a
/// directory, or not writable; or `path` is an existing directory), or Ok.
pub fn check_writable(path: &Path) -> Result<(), OutputPathError> {
    match output_kind(path)? {
        OutputKind::Replace(at) => check_dir_writable(&parent_dir(&at)),
        // A device or FIFO is opened when written; nothing is created beside it.
        OutputKind::WriteThrough => Ok(()),
    }
}

/// Why `dir` cannot hold an output *directory* (`--report DIR`): it must be a writable
/// directory, or not exist yet under a writable parent.
pub fn check_dir_target(dir: &Path) -> Result<(), OutputPathError> {
    if dir.exists() {
        if !dir.is_dir() {
            return Err(OutputPathError::NotADirectory(dir.to_path_buf()));
        }
        return check_dir_writable(dir);
    }
    check_dir_writable(&parent_dir(dir))
}

fn check_dir_writable(dir: &Path) -> Result<(), OutputPathError> {
    if !dir.is_dir() {
        return Err(OutputPathError::NoSuchDirectory(dir.to_path_buf()));
    }
    tempfile::Builder::new()
        .prefix(".conform-probe-")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|error| OutputPathError::NotWritable {
            dir: dir.to_path_buf(),
            error,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_files_and_leaves_no_temporary_behind() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        write(&p, b"one").unwrap();
        write(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "a temporary file was left behind");
    }

    #[cfg(unix)]
    #[test]
    fn written_files_get_the_permissions_of_a_plain_write() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("plain.json");
        std::fs::write(&plain, b"x").unwrap();
        let atomic = d.path().join("atomic.json");
        write(&atomic, b"x").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&atomic), mode(&plain));
    }

    #[test]
    fn refuses_missing_directories_and_directories_as_files() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("no/such/dir/r.json");
        let e = check_writable(&missing).unwrap_err().to_string();
        assert!(e.contains("no such directory"), "{e}");
        let e = check_writable(d.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        assert!(check_writable(&d.path().join("r.json")).is_ok());
        assert!(check_dir_target(&d.path().join("report")).is_ok());
        assert!(check_dir_target(&d.path().join("a/report")).is_err());
        assert!(check_writable(Path::new("bare-name.json")).is_ok());
    }
}
