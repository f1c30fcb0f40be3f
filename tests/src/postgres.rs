//! A real PostgreSQL server for the tests: the system's PostgreSQL (installed from Debian's packages when it is
//! missing and the tests run as root), a new cluster in a temporary folder, started on a free loopback port as an
//! unprivileged user (the server refuses to run as root), and stopped and removed when the handle goes. A test
//! that cannot get one says so loudly and skips; it never passes silently.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long the server may take to say it accepts connections.
const READY: Duration = Duration::from_secs(60);

/// A PostgreSQL server of its own, on loopback; stopped and removed when dropped.
pub struct Postgres {
    server: Child,
    dir: PathBuf,
    port: u16,
}

impl Postgres {
    /// Installs (if needed), creates and starts a server; `Err` says why there is none.
    pub fn start() -> Result<Self, String> {
        let bin = binaries()?;
        let dir = std::env::temp_dir().join(format!("agentry-pg-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let user = server_user()?;
        if let Some(user) = &user {
            run(Command::new("chown").args(["-R", user]).arg(&dir), "chown the cluster's folder")?;
        }
        let data = dir.join("data");
        let mut initdb = as_user(&user, &bin.join("initdb"));
        run(initdb.args(["-U", "agentry", "--auth=trust", "--no-sync", "-E", "UTF8", "-D"]).arg(&data), "initdb")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let mut server = as_user(&user, &bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "max_connections=200", "-k"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("the server did not start: {e}"))?;
        let stderr = server.stderr.take().ok_or("no stderr")?;
        let (ready_tx, ready) = mpsc::channel();
        std::thread::spawn(move || {
            let mut told = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !told && line.contains("ready to accept connections") {
                    told = true;
                    let _ = ready_tx.send(Ok(()));
                } else if line.contains("FATAL") || line.contains("PANIC") {
                    eprintln!("postgres: {line}");
                    if !told {
                        let _ = ready_tx.send(Err(line));
                        told = true;
                    }
                }
            }
        });
        let postgres = Self { server, dir, port };
        match ready.recv_timeout(READY) {
            Ok(Ok(())) => Ok(postgres),
            Ok(Err(line)) => Err(format!("the server failed: {line}")),
            Err(_) => Err(format!("the server did not accept connections within {READY:?}")),
        }
    }

    /// The connection string (`host=127.0.0.1 port=… user=agentry dbname=postgres`).
    pub fn url(&self) -> String {
        format!("host=127.0.0.1 port={} user=agentry dbname=postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Set (by `.ci/run`, which installs PostgreSQL) to make a test that cannot get its server fail rather than
/// skip: a skip's message is hidden by the test runner's capture when the test passes.
pub const REQUIRED: &str = "AGENTRY_REQUIRE_POSTGRES";

/// A server for a test, or `None` after saying loudly why there is none (a failure instead, with [`REQUIRED`]
/// set).
pub fn or_skip(test: &str) -> Option<Postgres> {
    match Postgres::start() {
        Ok(postgres) => Some(postgres),
        Err(why) if std::env::var_os(REQUIRED).is_some() => {
            panic!("{test}: no PostgreSQL server, and {REQUIRED} says there must be one: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED {test}: no PostgreSQL server: {why}");
            None
        }
    }
}

/// The folder with PostgreSQL's server programs, installing Debian's package first if there is none.
fn binaries() -> Result<PathBuf, String> {
    if let Some(found) = find_binaries() {
        return Ok(found);
    }
    if !is_root() {
        return Err("PostgreSQL is not installed, and only root may install it (apt-get install postgresql)".into());
    }
    let quiet = |c: &mut Command| c.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    let installed = quiet(Command::new("apt-get").arg("update"))
        && quiet(Command::new("apt-get").args(["install", "-y", "--no-install-recommends", "postgresql"]));
    if !installed {
        return Err("apt-get install postgresql failed".into());
    }
    find_binaries().ok_or_else(|| "PostgreSQL was installed, but its programs were not found".into())
}

/// `/usr/lib/postgresql/<version>/bin` (the newest), if it has `initdb` and `postgres`.
fn find_binaries() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file() && bin.join("postgres").is_file())
        .collect();
    found.sort_by_key(|bin| {
        bin.parent().and_then(Path::file_name).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok())
    });
    found.pop()
}

/// The user the server runs as: `None` (this one) unless this is root, which the server refuses; then the
/// `postgres` user Debian's package makes.
fn server_user() -> Result<Option<String>, String> {
    if !is_root() {
        return Ok(None);
    }
    let known = Command::new("id").arg("postgres").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    if known { Ok(Some("postgres".to_owned())) } else { Err("running as root, and there is no `postgres` user".into()) }
}

fn as_user(user: &Option<String>, program: &Path) -> Command {
    match user {
        Some(user) => {
            let mut command = Command::new("runuser");
            command.args(["-u", user, "--"]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command.output().map_err(|e| format!("{what}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed: {}", String::from_utf8_lossy(&output.stderr).trim()))
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
