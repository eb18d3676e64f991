//! kubectl against `informer serve`'s server: `get pods -A -o json` lists exactly the
//! server's pods, `get pods --watch -o name` prints changes as they happen. Skipped (with the
//! reason printed) where no kubectl is installed; `.ci/run` installs Debian's
//! `kubernetes-client` when it can.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{runtime, sim, start};

/// The kubectl binary, or `None` (with the reason printed) when there is none.
fn kubectl() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file());
    if found.is_none() {
        println!("skipped: kubectl not found on PATH (Debian package kubernetes-client)");
    }
    found
}

fn command(kubectl: &std::path::Path, url: &str, kubeconfig: &std::path::Path) -> Command {
    let mut c = Command::new(kubectl);
    // An empty kubeconfig: nothing from the machine's own configuration leaks in.
    c.env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .arg("--server")
        .arg(url)
        .arg("--request-timeout=20s");
    c
}

fn empty_kubeconfig(tag: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("informer-kubectl-{tag}-{}", std::process::id()));
    std::fs::write(&p, "").unwrap();
    p
}

#[test]
fn kubectl_get_pods_json_lists_the_servers_pods() {
    let Some(kubectl) = kubectl() else { return };
    let rt = runtime();
    let sim = sim("head", |c| c.initial_objects(120).target_objects(120));
    let server = rt.block_on(start(&sim));
    let kc = empty_kubeconfig("get");
    let out = command(&kubectl, &server.url(), &kc)
        .args(["get", "pods", "-A", "-o", "json", "--chunk-size=50"])
        .output()
        .unwrap();
    std::fs::remove_file(&kc).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let got: std::collections::BTreeMap<String, String> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let m = &p["metadata"];
            (
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap()
                ),
                m["resourceVersion"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let truth: std::collections::BTreeMap<String, String> = sim
        .truth()
        .objects
        .iter()
        .map(|(k, o)| (k.to_string(), o.resource_version().to_owned()))
        .collect();
    assert_eq!(got, truth);
    // The typed fields came through the JSON twin: kubectl printed the fixture's image.
    assert_eq!(
        v["items"][0]["spec"]["containers"][0]["image"],
        "imageValue"
    );
    rt.block_on(server.shutdown());
}

#[test]
fn kubectl_watch_prints_events_as_they_happen() {
    let Some(kubectl) = kubectl() else { return };
    let rt = runtime();
    let sim = sim("head", |c| c.initial_objects(10).target_objects(10));
    let server = rt.block_on(start(&sim));
    let kc = empty_kubeconfig("watch");
    let mut child = command(&kubectl, &server.url(), &kc)
        .args(["get", "pods", "-A", "--watch", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| {
        rx.recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("kubectl printed nothing for {what}"))
    };
    // The initial list: one line per pod.
    let mut initial: Vec<String> = (0..10).map(|_| next("the initial list")).collect();
    initial.sort();
    let mut expected: Vec<String> = sim
        .truth()
        .objects
        .values()
        .map(|o| format!("pod/{}", o.name()))
        .collect();
    expected.sort();
    assert_eq!(initial, expected);
    // Each change appears as it happens, in order.
    let keys: Vec<_> = sim.truth().objects.keys().take(3).cloned().collect();
    for key in &keys {
        let start = Instant::now();
        sim.update(key).unwrap();
        assert_eq!(next("an update"), format!("pod/{}", key.name()));
        assert!(start.elapsed() < Duration::from_secs(20));
    }
    let created = sim.create("ns-0", "brand-new").unwrap();
    assert_eq!(next("a create"), format!("pod/{}", created.name()));
    child.kill().ok();
    child.wait().ok();
    std::fs::remove_file(&kc).ok();
    rt.block_on(server.shutdown());
}
