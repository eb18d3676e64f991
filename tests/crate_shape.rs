//! The library's default build is what a controller needs: a crate depending on `informer`
//! with default features (`examples/lean-user`) must not build the command line's, the
//! simulator's or an HTTP server's dependencies. CI also builds that crate.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Packages of the lean user's normal and build dependency graph, with their features.
fn lean_user_graph() -> BTreeMap<String, String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lean-user/Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["tree", "--manifest-path"])
        .arg(&manifest)
        .args(["-e", "normal,build", "--prefix", "none", "-f", "{p}|{f}"])
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|l| {
            let (package, features) = l.trim_end_matches(" (*)").split_once('|')?;
            let name = package.split(' ').next()?.to_owned();
            Some((name, features.to_owned()))
        })
        .collect()
}

#[test]
fn a_user_crate_on_default_features_builds_no_cli_simulator_or_server_dependency() {
    let graph = lean_user_graph();
    assert!(graph.contains_key("informer"), "{graph:?}");
    assert_eq!(graph["informer"], "default", "the user asks for no feature");
    for banned in [
        "clap",
        "indicatif",
        "hdrhistogram",
        "mimalloc",
        "libmimalloc-sys",
    ] {
        assert!(
            !graph.contains_key(banned),
            "{banned} is in a default-features user's build"
        );
    }
    for (package, features) in [
        ("hyper", &graph["hyper"]),
        ("hyper-util", &graph["hyper-util"]),
    ] {
        assert!(
            !features
                .split(',')
                .any(|f| f == "server" || f.starts_with("server-")),
            "{package} is built with its server: {features}"
        );
    }
    // The engine and the HTTP client are there.
    for needed in ["kube-client", "arc-swap", "crossbeam", "prost", "bytes"] {
        assert!(graph.contains_key(needed), "{needed} missing: {graph:?}");
    }
}
