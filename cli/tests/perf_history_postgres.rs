//! The perf history on a real PostgreSQL server (the store many runners share): the test
//! starts a private server from the distribution's package (`initdb` and `pg_ctl` under
//! `/usr/lib/postgresql/<version>/bin`; as root, as the package's `postgres` user), runs the
//! same workflow as the SQLite test through `--db postgres://...`, checks the refusals of a
//! foreign database and of a newer schema (nothing written), and stops the server.
//!
//! Without a PostgreSQL installation the trial is ignored with the reason, unless
//! CONFORM_REQUIRE_POSTGRES is set (CI installs the package and sets it), where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use conform_test_support::history_scenario::{self, conform, text, write_night};
use conform_test_support::trials;

/// The newest installed PostgreSQL's bin directory.
fn pg_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").exists() && bin.join("pg_ctl").exists()).then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A command run as the `postgres` user when we are root (the server refuses root).
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// A private server; stopped when dropped.
struct Server {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
}

impl Server {
    fn start(bin: PathBuf, dir: &Path) -> Server {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let data = dir.join("data");
        let o = as_server_user(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "conform", "-E", "UTF8", "--no-sync"])
            .output()
            .unwrap();
        assert!(o.status.success(), "initdb: {o:?}");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let o = as_server_user(&bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("server.log"))
            .arg("-o")
            .arg(format!(
                "-p {port} -c listen_addresses=127.0.0.1 -k {} -c fsync=off",
                dir.display()
            ))
            .args(["-w", "-t", "60", "start"])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "pg_ctl start: {o:?}\n{}",
            std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
        );
        Server { bin, data, port }
    }

    fn url(&self, db: &str) -> String {
        format!("postgres://conform@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = as_server_user(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "fast", "-w", "stop"])
            .output();
    }
}

fn workflow_and_refusals_on_a_real_server() {
    let bin = pg_bin().expect("checked by main");
    let dir = tempfile::Builder::new()
        .prefix("conform-pg")
        .tempdir_in("/tmp")
        .unwrap();
    let server = Server::start(bin, dir.path());
    let work = tempfile::tempdir().unwrap();

    // The shared store: the whole workflow, as on a file.
    let url = server.url("postgres");
    history_scenario::ingest_list_show_export_and_gate(work.path(), &url);

    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // Another application's database: refused, untouched.
    admin.batch_execute("CREATE DATABASE billing").unwrap();
    let billing = server.url("billing");
    let mut other = postgres::Client::connect(&billing, postgres::NoTls).unwrap();
    other
        .batch_execute("CREATE TABLE invoices (id BIGINT PRIMARY KEY, total DOUBLE PRECISION)")
        .unwrap();
    write_night(work.path(), 1, 99, 100.0);
    for args in [
        vec![
            "perf",
            "history",
            "ingest",
            "--db",
            billing.as_str(),
            "night01.json",
        ],
        vec!["perf", "history", "list", "--db", billing.as_str()],
    ] {
        let o = conform(&args, work.path());
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(
            t.contains("not a conform perf history (its tables: invoices)"),
            "{t}"
        );
    }
    let tables: i64 = other
        .query_one(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "the foreign database was written to");

    // A history written by a newer conform: refused, its rows unchanged.
    admin
        .batch_execute("UPDATE conform_history SET value = '99' WHERE key = 'schema_version'")
        .unwrap();
    let runs_before: i64 = admin
        .query_one("SELECT COUNT(*) FROM runs", &[])
        .unwrap()
        .get(0);
    let o = conform(
        &[
            "perf",
            "history",
            "ingest",
            "--db",
            url.as_str(),
            "night01.json",
        ],
        work.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("schema version 99 is newer"),
        "{}",
        text(&o)
    );
    let runs_after: i64 = admin
        .query_one("SELECT COUNT(*) FROM runs", &[])
        .unwrap()
        .get(0);
    assert_eq!(runs_before, runs_after);

    // A database that does not exist on the server: named, exit 2.
    let o = conform(
        &[
            "perf",
            "history",
            "list",
            "--db",
            server.url("nope").as_str(),
        ],
        work.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("/nope: cannot connect"), "{}", text(&o));
    drop(other);
    drop(admin);
    drop(server);
}

fn main() {
    let required = !std::env::var("CONFORM_REQUIRE_POSTGRES")
        .unwrap_or_default()
        .is_empty();
    // Required (CI): runs, and fails where the server or the feature is missing.
    let missing = if required {
        None
    } else if !cfg!(feature = "postgres") {
        Some(
            "conform was built without the `postgres` feature: test with `--all-features` (or \
             `--features conform-cli/postgres`)"
                .to_string(),
        )
    } else {
        pg_bin().is_none().then(|| {
            "no PostgreSQL server installed (/usr/lib/postgresql/<version>/bin/initdb): install \
             the distribution's postgresql package"
                .to_string()
        })
    };
    trials::run(vec![trials::Test {
        name: "workflow_and_refusals_on_a_real_server",
        body: workflow_and_refusals_on_a_real_server,
        missing,
    }])
}
