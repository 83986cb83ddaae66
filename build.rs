//! Records the git revision and rustc version for run.json.
//!
//! Reruns when the revision can change (HEAD, the branch it points to, packed refs) or the
//! sources the binary is built from change (their `--dirty` state), not on every git
//! command that touches `.git/index` (a 3-4 minute rebuild on 2 cores after `git add`).
use std::process::Command;

fn main() {
    let rev = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let ver = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=GRADCOMP_GIT_REVISION={rev}");
    println!("cargo:rustc-env=GRADCOMP_RUSTC_VERSION={ver}");
    // Only paths that exist: cargo reruns a build script on every build for a missing one.
    let watch = |p: &str| {
        if std::path::Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    };
    watch(".git/HEAD");
    watch(".git/packed-refs");
    // The branch HEAD points to (`ref: refs/heads/main`): a commit moves it.
    if let Some(r) = std::fs::read_to_string(".git/HEAD")
        .ok()
        .and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_string()))
    {
        watch(&format!(".git/{r}"));
    }
    for p in ["src", "Cargo.toml", "Cargo.lock", "build.rs"] {
        watch(p);
    }
}
