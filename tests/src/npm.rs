//! Installing the tests' npm packages into the workspace's ignored `.cache/`: staged in a folder of this process's
//! own and renamed into place, so test processes racing to install never see half a package.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Unless `installed()` says it is there, runs `npm <args> --prefix <staging>` after copying `manifests` into the
/// staging folder, then moves it to `home` (unless another process got there first; its copy then stands).
/// One install at a time in a process. Panics with npm's status if npm fails.
pub fn install(home: &Path, what: &str, manifests: &[PathBuf], args: &[&str], installed: impl Fn() -> bool) {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if installed() {
        return;
    }
    let parent = home.parent().expect("the cache folder has a parent");
    std::fs::create_dir_all(parent).expect("the cache folder can be made");
    let name = home.file_name().expect("the cache folder has a name").to_string_lossy();
    let staging = parent.join(format!("{name}.installing.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).expect("a staging folder can be made");
    for manifest in manifests {
        let file = manifest.file_name().expect("a manifest is a file");
        std::fs::copy(manifest, staging.join(file)).expect("the manifests are copied");
    }
    let status = Command::new("npm")
        .args(args)
        .args(["--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
        .arg(&staging)
        .status()
        .expect("npm runs (Node.js and npm must be installed)");
    assert!(status.success(), "npm could not install {what}: {status}");
    if std::fs::rename(&staging, home).is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
}
