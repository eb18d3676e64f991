//! The Go programs under `interop/` (`interop/bin/<name>`), built when missing or stale.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock, PoisonError};

/// `interop/bin/<name>` (e.g. `apiserver`, `client-go`), built once per process by
/// `interop/build.sh <name>` when missing or older than its sources (Go's caches make a
/// rebuild take seconds). Go is part of the machine, not optional.
///
/// # Panics
/// When `interop/build.sh` cannot run or fails (its output is in the message).
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, Result<PathBuf, String>>>> = OnceLock::new();
    let built = BUILT
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(name.to_owned())
        .or_insert_with(|| build(name))
        .clone();
    // Panicked on after the lock is released: every caller then sees the build's own error.
    built.unwrap_or_else(|e| panic!("{e}"))
}

fn build(name: &str) -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = root.join("interop/bin").join(name);
    if !stale(&bin, &root.join("interop").join(name)) {
        return Ok(bin);
    }
    eprintln!(
        "{} is missing or stale: interop/build.sh {name}",
        bin.display()
    );
    let out = Command::new("bash")
        .arg(root.join("interop/build.sh"))
        .arg(name)
        .output()
        .map_err(|e| format!("interop/build.sh {name} could not run: {e}"))?;
    if !out.status.success() || !bin.is_file() {
        return Err(format!(
            "interop/build.sh {name} failed ({}); Go 1.26 is needed:\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(bin)
}

/// Whether `bin` is missing or older than a Go source or module file of `src`.
fn stale(bin: &Path, src: &Path) -> bool {
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else {
        return true;
    };
    let Ok(entries) = std::fs::read_dir(src) else {
        return true;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        (name.ends_with(".go") || name == "go.mod" || name == "go.sum")
            && e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t > built)
    })
}
