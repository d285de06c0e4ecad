//! Reading a file conform is given, within a size limit: every file conform reads (suites,
//! worker declarations, the golden store, results, journals, perf files, ...) goes through
//! here, so no input can make it exhaust memory or wait forever.
//!
//! - A regular file larger than its limit is refused from its size, before a byte is read
//!   (a 10 GB sparse file costs nothing).
//! - Anything else that can be read (a character device such as `/dev/zero`, a FIFO, a pipe
//!   from `<(...)`) is read as a stream that stops at the limit with an error. A FIFO waits
//!   for a writer at most [`FIFO_WRITER_WAIT`]: one that nobody writes to is an error.
//! - A text file holding a NUL byte is refused at the first one (JSON and TOML never hold
//!   one): `/dev/zero` or a sparse file under a text file's name fails at once.
//!
//! The errors are [`std::io::Error`]s whose message names the limit and what was found, so each
//! caller's existing "cannot read FILE: ..." error carries them; the callers name the file.

use std::io::Read;
use std::path::Path;

/// The most bytes a kind of file may hold, and its name in the error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// What the file is, in the error ("a suite file", "a results file").
    pub what: &'static str,
    pub bytes: u64,
}

const MIB: u64 = 1 << 20;

impl Limit {
    /// A worker declaration (`target.toml`): a few hundred bytes in practice.
    pub const WORKER_DECLARATION: Limit = Limit {
        what: "a worker declaration (target.toml)",
        bytes: 4 * MIB,
    };
    /// A suite file (the largest shipped one is under 20 KiB).
    pub const SUITE: Limit = Limit {
        what: "a suite file",
        bytes: 4 * MIB,
    };
    /// The golden store's `MANIFEST.toml` (about 140 KiB for every case today).
    pub const GOLDEN_MANIFEST: Limit = Limit {
        what: "a golden MANIFEST.toml",
        bytes: 64 * MIB,
    };
    /// One golden tensor file (the largest quick-tier one is about 6 MiB; docs/golden.md).
    pub const GOLDEN_TENSORS: Limit = Limit {
        what: "a golden tensor file",
        bytes: 1024 * MIB,
    };
    /// A configuration table: a hardware profile, an MC2 cost table.
    pub const CONFIG: Limit = Limit {
        what: "a configuration file",
        bytes: 4 * MIB,
    };
    /// A results file, a run's or an adequacy run's journal, an adequacy matrix, the index of
    /// kept tensors (every quick case with its metrics is a few MiB).
    pub const RESULTS: Limit = Limit {
        what: "a results file or journal",
        bytes: 256 * MIB,
    };
    /// A perf file (raw samples of every case), a comparison or an MC2 timeline.
    pub const PERF: Limit = Limit {
        what: "a perf file",
        bytes: 256 * MIB,
    };

    /// A tensor file whose tensors hold `data_bytes` in all: that, plus room for the header.
    pub fn tensors(data_bytes: u64) -> Limit {
        Limit {
            what: "the expected tensor file",
            bytes: data_bytes.saturating_add(16 * MIB),
        }
    }

    /// A tensor file that should hold exactly the tensors `specs` describe (a worker's outputs,
    /// a request's inputs).
    pub fn for_specs(specs: &[conform_reference::ops::TensorSpec]) -> Limit {
        Limit::tensors(
            specs
                .iter()
                .map(|s| (s.shape.iter().product::<usize>() * s.dtype.size_bytes()) as u64)
                .fold(0u64, u64::saturating_add),
        )
    }

    fn too_large(&self, found: &str) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{found}, more than the {} {} may hold",
                human(self.bytes),
                self.what
            ),
        )
    }
}

/// `n` bytes as the docs write sizes (`4 MiB`, `1 GiB`, `10.0 GiB`).
pub fn human(n: u64) -> String {
    const GIB: u64 = 1 << 30;
    match n {
        n if n >= GIB && n % GIB == 0 => format!("{} GiB", n / GIB),
        n if n >= GIB => format!("{:.1} GiB", n as f64 / GIB as f64),
        n if n >= MIB && n % MIB == 0 => format!("{} MiB", n / MIB),
        n if n >= MIB => format!("{:.1} MiB", n as f64 / MIB as f64),
        n => format!("{n} bytes"),
    }
}

/// Opens `path` for reading within `limit`: refused at once when it is a directory or a
/// regular file larger than the limit; a named FIFO waits for a writer at most
/// [`FIFO_WRITER_WAIT`]. The reader fails once it has given `limit` bytes and more remain.
pub fn open(path: &Path, limit: Limit) -> std::io::Result<Bounded<std::fs::File>> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "is a directory, not a file",
        ));
    }
    if meta.is_file() && meta.len() > limit.bytes {
        return Err(limit.too_large(&format!("{} ({} bytes)", human(meta.len()), meta.len())));
    }
    let file = open_without_waiting(path, &meta)?;
    Ok(Bounded {
        inner: file,
        limit,
        read: 0,
        text: false,
    })
}

/// As [`open`], for a text file (JSON, TOML, JSON lines): the reader also fails at the first
/// NUL byte.
pub fn open_text(path: &Path, limit: Limit) -> std::io::Result<Bounded<std::fs::File>> {
    let mut r = open(path, limit)?;
    r.text = true;
    Ok(r)
}

/// The whole of a text file, within `limit` (see [`open_text`]); not UTF-8 is an error.
pub fn read_text(path: &Path, limit: Limit) -> std::io::Result<String> {
    let mut s = String::new();
    open_text(path, limit)?.read_to_string(&mut s)?;
    Ok(s)
}

/// The whole of a file's bytes, within `limit` (see [`open`]).
pub fn read_bytes(path: &Path, limit: Limit) -> std::io::Result<Vec<u8>> {
    let mut r = open(path, limit)?;
    let mut bytes = Vec::new();
    if let Ok(len) = r.inner.metadata().map(|m| m.len()) {
        // A regular file's size is known (and within the limit): one allocation.
        let _ = bytes.try_reserve_exact(len.min(limit.bytes) as usize);
    }
    r.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// How long a FIFO is waited on for a writer before it is refused.
pub const FIFO_WRITER_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

#[cfg(unix)]
fn open_without_waiting(path: &Path, meta: &std::fs::Metadata) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    if !meta.file_type().is_fifo() {
        return std::fs::File::open(path);
    }
    // A plain open of a FIFO blocks until a writer comes, forever if none does. Opened
    // non-blocking it returns at once; then a writer is waited for (data or its end) for
    // FIFO_WRITER_WAIT, and blocking reads are restored: a producer started beside conform
    // is read to its end, a FIFO nobody writes to is an error within seconds.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let fd = file.as_raw_fd();
    let start = std::time::Instant::now();
    // A pipe (`<(producer)`, `/dev/stdin`) has its producer already: it is read as it comes,
    // however slowly (a producer that has ended leaves what it wrote, then end-of-file).
    while !is_anonymous_pipe(meta) {
        let left = FIFO_WRITER_WAIT.saturating_sub(start.elapsed());
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for a descriptor this function owns.
        let r = unsafe { libc::poll(&mut p, 1, left.as_millis() as libc::c_int) };
        if r > 0 {
            break;
        }
        let err = std::io::Error::last_os_error();
        if r < 0 && err.kind() == std::io::ErrorKind::Interrupted && !left.is_zero() {
            continue;
        }
        if r < 0 {
            return Err(err);
        }
        return Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "a FIFO that no process wrote to within {} s",
                FIFO_WRITER_WAIT.as_secs()
            ),
        ));
    }
    // SAFETY: fcntl on a descriptor this function owns; F_GETFL / F_SETFL have no memory
    // effects.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

/// Whether `meta` is an anonymous pipe's (a FIFO on the kernel's pipe file system, not a
/// named FIFO on a disk): compared with the device of a pipe made once for the purpose.
#[cfg(unix)]
fn is_anonymous_pipe(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    static PIPE_DEVICE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let dev = PIPE_DEVICE.get_or_init(|| {
        let mut fds = [0; 2];
        // SAFETY: pipe fills two descriptors this function closes; fstat writes into a zeroed
        // stat of the right type.
        unsafe {
            if libc::pipe(fds.as_mut_ptr()) != 0 {
                return None;
            }
            let mut st: libc::stat = std::mem::zeroed();
            let ok = libc::fstat(fds[0], &mut st) == 0;
            libc::close(fds[0]);
            libc::close(fds[1]);
            ok.then_some(st.st_dev as u64)
        }
    });
    *dev == Some(meta.dev())
}

#[cfg(not(unix))]
fn open_without_waiting(path: &Path, _meta: &std::fs::Metadata) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// A reader that fails past its limit (and, for text, at a NUL byte).
pub struct Bounded<R> {
    inner: R,
    limit: Limit,
    read: u64,
    text: bool,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // One byte past the limit tells a file of exactly `limit` bytes from a longer one.
        let room = (self.limit.bytes + 1).saturating_sub(self.read);
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if self.text
            && let Some(i) = buf[..n].iter().position(|&b| b == 0)
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "a NUL byte at offset {}: not a text file",
                    self.read + i as u64
                ),
            ));
        }
        self.read += n as u64;
        if self.read > self.limit.bytes {
            return Err(self
                .limit
                .too_large("more bytes than that (reading stopped there)"));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: Limit = Limit {
        what: "a test file",
        bytes: 16,
    };

    #[test]
    fn a_regular_file_over_the_limit_is_refused_from_its_size() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big");
        let f = std::fs::File::create(&p).unwrap();
        // Sparse: 10 GB that take no disk and are never read.
        f.set_len(10_000_000_000).unwrap();
        let t = std::time::Instant::now();
        let e = read_text(&p, Limit::SUITE).unwrap_err();
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(
            e.to_string(),
            "9.3 GiB (10000000000 bytes), more than the 4 MiB a suite file may hold"
        );
        std::fs::write(&p, b"0123456789abcdef").unwrap();
        assert_eq!(read_text(&p, TINY).unwrap(), "0123456789abcdef");
        std::fs::write(&p, b"0123456789abcdefg").unwrap();
        assert!(read_text(&p, TINY).is_err());
        assert!(read_bytes(&p, TINY).is_err());
        assert!(read_text(d.path(), TINY)
            .unwrap_err()
            .to_string()
            .contains("directory"));
    }

    #[cfg(unix)]
    #[test]
    fn streams_stop_at_the_limit_and_text_at_a_nul() {
        let t = std::time::Instant::now();
        let e = read_text(Path::new("/dev/zero"), Limit::RESULTS).unwrap_err();
        assert!(e.to_string().contains("NUL byte at offset 0"), "{e}");
        let e = read_bytes(Path::new("/dev/zero"), TINY).unwrap_err();
        assert!(e.to_string().contains("more than the 16 bytes"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_read_from_its_writer_and_refused_without_one() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo under a temporary directory this test owns.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = std::time::Instant::now();
        let e = read_text(&p, TINY).unwrap_err();
        assert!(e.to_string().contains("no process wrote to"), "{e}");
        assert!(t.elapsed() < FIFO_WRITER_WAIT + std::time::Duration::from_secs(2));
        // A writer (its open waits for the reader) is read to its end.
        let w = {
            let p = p.clone();
            std::thread::spawn(move || std::fs::write(p, "{}\n").unwrap())
        };
        assert_eq!(read_text(&p, TINY).unwrap(), "{}\n");
        w.join().unwrap();
        // An anonymous pipe (what `<(producer)` gives) waits for its producer, however slow.
        let mut fds = [0; 2];
        // SAFETY: pipe fills two descriptors; the write end is closed by the writer thread
        // (through the File that owns it), the read end below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let writer = {
            use std::io::Write;
            use std::os::fd::FromRawFd;
            // SAFETY: fds[1] is a fresh descriptor this File now owns.
            let mut f = unsafe { std::fs::File::from_raw_fd(fds[1]) };
            std::thread::spawn(move || {
                std::thread::sleep(FIFO_WRITER_WAIT + std::time::Duration::from_millis(500));
                f.write_all(b"[]").unwrap();
            })
        };
        let path = format!("/proc/self/fd/{}", fds[0]);
        assert_eq!(read_text(Path::new(&path), TINY).unwrap(), "[]");
        writer.join().unwrap();
        // SAFETY: closing the read end this test made.
        unsafe { libc::close(fds[0]) };
    }
}
