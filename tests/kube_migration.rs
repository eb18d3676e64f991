//! `examples/kube_migration.rs`, both engines at once (kube-runtime's `Controller` and ours),
//! as child processes against the same server while its Deployments change: against
//! `informer serve` (changes made through its flood endpoint) and against a real
//! kube-apiserver (changes written through the API). After stdin closes, each must report that
//! it converged, with decisions equal to each other's and to a fresh list from the server.

mod interop;
mod kube_apiserver;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_apiserver::fixtures::Fixture;
use kube_apiserver::{KubeApiServer, namespace};
use serde_json::{Value, json};

/// The example's binary. `cargo test` builds examples beside the tests' binaries, but
/// `cargo test --test kube_migration` does not: then `cargo build --example kube_migration`
/// (same profile) first. A binary older than the example's source is refused.
fn example() -> std::path::PathBuf {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_informer"))
        .parent()
        .unwrap()
        .join("examples/kube_migration");
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kube_migration.rs");
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    assert!(
        modified(&bin) >= modified(&source),
        "{} is missing or older than its source: `cargo build --example kube_migration` (same \
         profile as the test)",
        bin.display()
    );
    bin
}

/// One engine of the example, running.
struct Running {
    engine: &'static str,
    child: Child,
    lines: Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Running {
    /// Starts the example with `--engine engine --json` and `args`, and waits until its cache
    /// synced.
    fn start(engine: &'static str, args: &[&str]) -> Running {
        let mut child = Command::new(example())
            .args(["--engine", engine, "--json", "--settle-timeout", "30"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        let mut running = Running {
            engine,
            child,
            lines,
            stderr: Some(stderr),
        };
        let first = running.lines.recv_timeout(Duration::from_secs(60));
        match first {
            Ok(l) if l.starts_with("synced: ") => running,
            other => panic!("{engine} did not sync: {other:?}\n{}", running.stderr()),
        }
    }

    /// Kills the child if it still runs; what it wrote on stderr.
    fn stderr(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let thread = self.stderr.take();
        thread
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Closes stdin, waits for the exit and returns the report (its last line).
    fn finish(mut self) -> Value {
        drop(self.child.stdin.take());
        let status = self.child.wait().unwrap();
        // Up to stdout's EOF: the reader thread may not have sent the last line yet.
        let lines: Vec<String> = self.lines.iter().collect();
        let err = self.stderr();
        assert!(
            status.success(),
            "{}: {status}: {lines:?}\n{err}",
            self.engine
        );
        let report: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
        assert_eq!(report["engine"], self.engine);
        report
    }
}

/// What a decision map must be: the listed Deployments' resourceVersion, `spec.replicas` and
/// `status.readyReplicas`, by `namespace/name`.
async fn expected(api: &Api<Deployment>) -> Value {
    let list = api.list(&ListParams::default()).await.unwrap();
    let map = list.items.iter().map(|d| {
        let m = &d.metadata;
        let key = format!(
            "{}/{}",
            m.namespace.as_deref().unwrap(),
            m.name.as_deref().unwrap()
        );
        let decision = json!({
            "resourceVersion": m.resource_version,
            "replicas": d.spec.replicas,
            "readyReplicas": d.status.as_ref().and_then(|s| s.ready_replicas),
        });
        (key, decision)
    });
    Value::Object(map.collect())
}

/// Both engines' reports agree with each other and with `want`, and both converged.
fn check(reports: [Value; 2], want: &Value) {
    for r in &reports {
        let summary = json!({"engine": r["engine"], "converged": r["converged"],
            "behind": r["behind"], "objects": r["objects"], "reconciles": r["reconciles"]});
        assert_eq!(r["converged"], true, "{summary}");
        assert_eq!(r["decisions"], *want, "{summary}");
        let objects = want.as_object().unwrap().len() as u64;
        assert_eq!(r["objects"], objects, "{summary}");
        // Every object was reconciled at least once, and the changes made more.
        assert!(r["reconciles"].as_u64().unwrap() > objects, "{summary}");
    }
    assert_eq!(reports[0]["decisions"], reports[1]["decisions"]);
}

/// `POST /informer/v1/flood?events=N`: `n` changes (creates, updates that scale, deletes).
async fn flood(client: &kube::Client, n: u32) {
    let request = http::Request::post(format!("/informer/v1/flood?events={n}"))
        .body(Vec::new())
        .unwrap();
    client.request_text(request).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_engines_decide_the_same_against_informer_serve() {
    let mut server = Command::new(env!("CARGO_BIN_EXE_informer"))
        .args(["serve", "--template", "deployments", "--objects", "40"])
        .args(["--rate", "0", "--status-every", "0", "--duration", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(server.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let api: Api<Deployment> = Api::all(client.clone());
    let before = expected(&api).await;

    let engines = tokio::task::block_in_place(|| {
        ["kube-runtime", "informer"].map(|e| Running::start(e, &["--server", &url]))
    });
    // Two seconds of changes, 30 at a time, then quiet.
    for _ in 0..10 {
        flood(&client, 30).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reports = tokio::task::block_in_place(|| engines.map(Running::finish));
    let want = expected(&api).await;
    assert_ne!(want, before, "the flood changed nothing");
    check(reports, &want);
    server.kill().ok();
    server.wait().ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_engines_decide_the_same_against_the_real_server() {
    let server = KubeApiServer::shared();
    let client = server.client().await;
    let ns = namespace(&client, "migration").await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let pp = PostParams::default();
    for i in 0..6 {
        api.create(&pp, &Deployment::make(i)).await.unwrap();
    }
    // No controller-manager: status is what is written.
    let status =
        |ready: i32| Patch::Merge(json!({"status": {"replicas": 3, "readyReplicas": ready}}));
    for i in [0, 1] {
        api.patch_status(&format!("o-{i}"), &PatchParams::default(), &status(1))
            .await
            .unwrap();
    }

    let kubeconfig = server.kubeconfig.to_str().unwrap();
    let engines = tokio::task::block_in_place(|| {
        ["kube-runtime", "informer"]
            .map(|e| Running::start(e, &["--kubeconfig", kubeconfig, "--namespace", &ns]))
    });
    // While both run: scale, change status, delete, create, and one object changed in quick
    // succession.
    let scale = |n: i32| Patch::Merge(json!({"spec": {"replicas": n}}));
    api.patch("o-0", &PatchParams::default(), &scale(4))
        .await
        .unwrap();
    api.patch_status("o-1", &PatchParams::default(), &status(3))
        .await
        .unwrap();
    for name in ["o-2", "o-3"] {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for i in [6, 7] {
        api.create(&pp, &Deployment::make(i)).await.unwrap();
    }
    for n in 1..=5 {
        api.patch("o-4", &PatchParams::default(), &scale(n))
            .await
            .unwrap();
    }
    let reports = tokio::task::block_in_place(|| engines.map(Running::finish));
    let want = expected(&api).await;
    assert_eq!(want.as_object().unwrap().len(), 6, "{want}");
    assert_eq!(want[format!("{ns}/o-0")]["replicas"], 4);
    assert_eq!(want[format!("{ns}/o-1")]["readyReplicas"], 3);
    assert_eq!(want[format!("{ns}/o-4")]["replicas"], 5);
    check(reports, &want);
}
