//! Real client-go as a peer: `interop/bin/client-go` (a user program of client-go v0.37's
//! `SharedInformerFactory`/`SharedIndexInformer`: protobuf, the namespace index, four handlers
//! that each keep their own key → resourceVersion view) against our server, through watches
//! that end in 410 (injected, and real: a watch that fell behind the history window),
//! connection resets, clean closes, a 410 answered to a watch and to a list, and relists that
//! must turn what was deleted meanwhile into tombstones. At the end its cache and every
//! handler's view equal the server's truth, key by key and by digest.
//!
//! The binary is built by `interop/build.sh client-go` when it is missing or older than its
//! sources; a failed build fails the tests (Go is part of the machine, not optional).

mod interop;
mod support;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use informer::server::{ServerConfig, ServerHandle, ServerStats, serve};
use informer::sim::{SimConfig, SimServer, Templates, Truth};
use serde_json::Value;
use support::runtime;

/// How long any one wait may take before the test fails (generous: CI machines are shared).
const WAIT: Duration = Duration::from_secs(60);

/// The client-go peer's binary (built when missing or stale).
fn client_go() -> PathBuf {
    interop::binary("client-go")
}

/// What the peer's stderr has said so far.
#[derive(Default)]
struct Log {
    tail: VecDeque<String>,
    synced: bool,
    store_rv: u64,
}

/// A running client-go peer that stops once its store reaches the resourceVersion written to
/// its stdin (`--until-rv -`) and every handler has caught up.
struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<JoinHandle<String>>,
    log: Arc<Mutex<Log>>,
}

impl Peer {
    fn spawn(url: &str, args: &[&str], env: &[(&str, &str)]) -> Peer {
        let mut child = Command::new(client_go())
            .args(["--server", url, "--handlers", "4", "--until-rv", "-"])
            .args([
                "--stop-on-stdin-eof",
                "--duration",
                "300",
                "--interval",
                "0.05",
            ])
            .args(["--json", "--dump-keys"])
            .args(args)
            .env_remove("KUBECONFIG")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start interop/bin/client-go");
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            out.read_to_string(&mut s).ok();
            s
        });
        let log = Arc::new(Mutex::new(Log::default()));
        let l = log.clone();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let mut l = l.lock().unwrap();
                l.synced |= line.starts_with("synced: ");
                if let Some(rv) = store_rv_of(&line) {
                    l.store_rv = rv;
                }
                if l.tail.len() == 40 {
                    l.tail.pop_front();
                }
                l.tail.push_back(line);
            }
        });
        Peer {
            stdin: child.stdin.take(),
            child,
            stdout: Some(stdout),
            log,
        }
    }

    fn stderr_tail(&self) -> String {
        let l = self.log.lock().unwrap();
        l.tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Polls `f` every 10 ms until it holds; fails the test (with client-go's last stderr
    /// lines) after [`WAIT`] or if client-go exits first.
    fn until(&mut self, what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + WAIT;
        while !f() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "client-go exited ({status}) while waiting for {what}; stderr:\n{}",
                    self.stderr_tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; client-go's stderr:\n{}",
                self.stderr_tail()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Tells client-go where the stream ends and waits for its report.
    fn finish(mut self, rv: u64) -> (ExitStatus, Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{rv}").unwrap();
        stdin.flush().unwrap();
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "client-go did not reach resourceVersion {rv}; stderr:\n{}",
                self.stderr_tail()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let out = self.stdout.take().unwrap().join().unwrap();
        let report = serde_json::from_str(&out).unwrap_or_else(|e| {
            panic!(
                "client-go's report is not JSON ({e}): {out:?}; stderr:\n{}",
                self.stderr_tail()
            )
        });
        (status, report)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.child.kill().ok();
            self.child.wait().ok();
        }
    }
}

/// The number after `(store ` in a progress line.
fn store_rv_of(line: &str) -> Option<u64> {
    let rest = line.split_once("(store ")?.1;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The stable digest client-go's report gives: SHA-256 over "KEY RV\n" lines sorted by key.
fn digest(versions: &BTreeMap<String, String>) -> String {
    let mut text = String::new();
    for (k, rv) in versions {
        text.push_str(k);
        text.push(' ');
        text.push_str(rv);
        text.push('\n');
    }
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `None` when equal, else counts of missing, extra and stale keys with an example of each.
fn describe_diff(
    want: &BTreeMap<String, String>,
    got: &BTreeMap<String, String>,
) -> Option<String> {
    let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    let stale: Vec<_> = want
        .iter()
        .filter(|(k, rv)| got.get(*k).is_some_and(|g| g != *rv))
        .map(|(k, rv)| format!("{k} at {} (server {rv})", got[k]))
        .collect();
    (!missing.is_empty() || !extra.is_empty() || !stale.is_empty()).then(|| {
        format!(
            "{} objects, server {}: {} missing (e.g. {:?}), {} extra (e.g. {:?}), {} stale (e.g. {:?})",
            got.len(),
            want.len(),
            missing.len(),
            missing.first(),
            extra.len(),
            extra.first(),
            stale.len(),
            stale.first()
        )
    })
}

fn keys_of(v: &Value, what: &str) -> BTreeMap<String, String> {
    serde_json::from_value(v["keys"].clone()).unwrap_or_else(|e| panic!("{what} keys: {e}"))
}

/// Asserts that the report's cache and every handler's view are the server's truth.
fn assert_matches_truth(status: ExitStatus, report: &Value, truth: &Truth) {
    let want: BTreeMap<String, String> = truth
        .objects
        .iter()
        .map(|(k, o)| (k.to_string(), o.resource_version().to_owned()))
        .collect();
    let sha = digest(&want);
    assert!(status.success(), "client-go exited {status}: {report}");
    assert_eq!(report["stopped_by"], "until", "{report}");
    assert_eq!(report["synced"], true);
    assert_eq!(report["format"], "protobuf");
    let cache = &report["cache"];
    if let Some(d) = describe_diff(&want, &keys_of(cache, "cache")) {
        panic!(
            "client-go's cache differs from the server at {}: {d}",
            truth.resource_version
        );
    }
    assert_eq!(cache["sha256"], sha.as_str(), "the cache digest");
    assert_eq!(report["objects"], want.len());
    let store_rv: u64 = report["store_resource_version"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("store_resource_version");
    assert!(store_rv >= truth.resource_version, "{report}");
    // The namespace index holds every object under its namespace.
    let namespaces: BTreeSet<_> = truth
        .objects
        .values()
        .map(|o| o.namespace().to_owned())
        .collect();
    assert_eq!(report["namespaces"], namespaces.len());
    assert_eq!(report["index_consistent"], true);
    let handlers = report["per_handler"].as_array().expect("per_handler");
    assert_eq!(handlers.len(), 4);
    for h in handlers {
        let name = h["name"].as_str().unwrap_or("?");
        if let Some(d) = describe_diff(&want, &keys_of(h, name)) {
            panic!("client-go's {name} view differs from the server: {d}");
        }
        assert_eq!(h["sha256"], sha.as_str(), "{name}'s digest");
        assert_eq!(h["matches_cache"], true);
        assert_eq!(h["unreadable"], 0);
    }
    assert_eq!(report["views_match_cache"], true);
}

/// One scenario: the simulator, its HTTP server and the client-go peer watching it.
struct Run {
    rt: tokio::runtime::Runtime,
    sim: SimServer,
    server: Option<ServerHandle>,
    peer: Peer,
}

impl Run {
    fn start(sim: SimServer, config: ServerConfig, args: &[&str], env: &[(&str, &str)]) -> Run {
        client_go();
        let rt = runtime();
        let server = rt
            .block_on(serve(sim.clone(), config, "127.0.0.1:0".parse().unwrap()))
            .unwrap();
        let mut peer = Peer::spawn(&server.url(), args, env);
        let log = peer.log.clone();
        peer.until("client-go to sync", || log.lock().unwrap().synced);
        let mut run = Run {
            rt,
            sim,
            server: Some(server),
            peer,
        };
        run.caught_up("the initial list");
        run
    }

    fn stats(&self) -> Arc<ServerStats> {
        self.server.as_ref().unwrap().stats().clone()
    }

    /// Waits until client-go's store reflects the server's current resourceVersion.
    fn caught_up(&mut self, what: &str) {
        let rv = self.sim.resource_version();
        let log = self.peer.log.clone();
        let stats = self.stats();
        self.peer
            .until(&format!("client-go to catch up after {what}"), || {
                log.lock().unwrap().store_rv >= rv
                    && stats.watches_open.load(Ordering::Relaxed) >= 1
            });
    }

    /// Arms `faults` and makes a few changes at a time until all of them fired.
    fn fire(&mut self, faults: &[&str]) {
        let before = self.sim.stats().faults_fired;
        for f in faults {
            self.sim.inject(f.parse().unwrap());
        }
        let sim = self.sim.clone();
        let n = faults.len() as u64;
        self.peer.until(&format!("{faults:?} to fire"), || {
            sim.step(5).unwrap();
            sim.stats().faults_fired >= before + n
        });
    }

    /// A watch that falls behind the history window for real: client-go's next watch (after a
    /// clean close) is held before its first byte while the server makes more changes than
    /// the window keeps, then released into a 410.
    fn real_expiry(&mut self) {
        let stats = self.stats();
        let watches = stats.watches.load(Ordering::Relaxed);
        self.server.as_ref().unwrap().hold_watches(true);
        self.fire(&["stream:close@5"]);
        self.peer.until("client-go to watch again", || {
            stats.watches.load(Ordering::Relaxed) > watches
        });
        let window = self.sim.config().history_window as u64;
        self.sim.step(window * 3).unwrap();
        self.server.as_ref().unwrap().hold_watches(false);
    }

    /// After a fault that makes client-go back off and relist: once its watch is gone, deletes
    /// a few objects and changes more (the relist must show the deletions as tombstones), then
    /// waits until it is back and caught up. `also` is armed while it is away.
    fn away(&mut self, what: &str, also: &[&str]) {
        let stats = self.stats();
        self.peer
            .until(&format!("client-go's watch to end after {what}"), || {
                stats.watches_open.load(Ordering::Relaxed) == 0
            });
        for f in also {
            self.sim.inject(f.parse().unwrap());
        }
        let keys: Vec<_> = self.sim.truth().objects.keys().take(5).cloned().collect();
        for k in &keys {
            self.sim.delete(k).unwrap();
        }
        self.sim.step(100).unwrap();
        self.caught_up(what);
    }

    /// Makes live changes, stops client-go at the server's resourceVersion and checks its
    /// report against the truth; returns the report.
    fn finish(mut self) -> Value {
        self.sim.step(300).unwrap();
        let truth = self.sim.truth();
        let (status, report) = self.peer.finish(truth.resource_version);
        let mut summary = report.clone();
        summary["cache"]["keys"] = Value::Null;
        for h in summary["per_handler"].as_array_mut().into_iter().flatten() {
            h["keys"] = Value::Null;
        }
        println!("client-go's report (keys left out): {summary}");
        assert_matches_truth(status, &report, &truth);
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
        report
    }
}

/// Watch-list on (client-go's default since 1.35): every relist is a streaming list
/// (`sendInitialEvents`), its deletions tombstones. HEAD Pods, a 300-event window.
#[test]
fn client_go_streaming_lists_match_the_server_through_410s_and_resets() {
    let sim = support::sim("head", |c| {
        c.initial_objects(300)
            .target_objects(300)
            .history_window(300)
    });
    let mut config = ServerConfig::default();
    config = config.json_twins(vec![support::head_pod_twin()]);
    // client-go's own check: each streaming list is compared, object by object, with a list
    // at exactly its resourceVersion (it panics on a difference).
    let mut run = Run::start(
        sim,
        config,
        &["--resource", "pods"],
        &[("KUBE_WATCHLIST_INCONSISTENCY_DETECTOR", "true")],
    );
    run.real_expiry();
    run.away("a watch that fell behind the window", &[]);
    run.fire(&["stream:410"]);
    run.away("an ERROR 410 event", &[]);
    run.fire(&["stream:reset"]);
    run.away("a connection reset", &[]);
    let sim = run.sim.clone();
    let report = run.finish();

    let requests = sim.requests();
    let streaming = requests
        .iter()
        .filter(|r| r.watch().is_some_and(|w| w.send_initial_events))
        .count();
    assert!(
        streaming >= 4,
        "{streaming} streaming lists: one at start and one after each 410 or reset"
    );
    let exact = requests
        .iter()
        .filter(|r| {
            r.list()
                .is_some_and(|l| l.resource_version_match.as_deref() == Some("Exact"))
        })
        .count();
    assert_eq!(
        exact, streaming,
        "client-go's consistency check listed at exactly each streaming list's resourceVersion"
    );
    assert_eq!(
        report["lists"], exact,
        "client-go never fell back to list + watch"
    );
    assert!(report["watch_list"].as_bool().unwrap());
    for h in report["per_handler"].as_array().unwrap() {
        assert!(
            h["tombstones"].as_u64().unwrap() >= 3,
            "the deletions made while client-go was away reach {} as tombstones: {h}",
            h["name"]
        );
    }
}

/// Watch-list off: paginated lists (pages of 50) and watches from the last resourceVersion;
/// a 410 answered to a watch, and to the first page of a relist (client-go then lists from
/// resourceVersion ""). HEAD Deployments through the apps group's typed informer.
#[test]
fn client_go_paginated_lists_match_the_server_through_410s_and_resets() {
    let fixtures = support::fixtures();
    let sim = SimServer::new(
        SimConfig::new(Templates::deployments(&fixtures).unwrap())
            .seed(7)
            .update_template(true)
            .initial_objects(300)
            .target_objects(300)
            .history_window(300)
            .max_page_size(Some(50)),
    )
    .unwrap();
    let mut run = Run::start(
        sim,
        ServerConfig::default(),
        &["--resource", "deployments.apps", "--watch-list=false"],
        &[],
    );
    run.real_expiry();
    run.away("a watch that fell behind the window", &["list:410"]);
    run.fire(&["stream:close@5", "watch:410"]);
    run.away("a watch answered 410", &[]);
    run.fire(&["stream:reset"]);
    run.away("a connection reset", &[]);
    let sim = run.sim.clone();
    let report = run.finish();

    let requests = sim.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.watch().is_none_or(|w| !w.send_initial_events)),
        "no streaming list with the gate off"
    );
    let pages = requests
        .iter()
        .filter(|r| r.list().is_some_and(|l| l.continue_token.is_some()))
        .count();
    assert!(
        pages >= 4 * 4,
        "{pages} continue pages: four lists of about 300 in pages of 50"
    );
    let unversioned = requests
        .iter()
        .filter(|r| {
            r.list().is_some_and(|l| {
                l.continue_token.is_none() && l.resource_version.as_deref().unwrap_or("").is_empty()
            })
        })
        .count();
    assert!(
        unversioned >= 1,
        "after the list's 410, a list from resourceVersion \"\""
    );
    assert_eq!(report["resource"], "deployments");
    assert_eq!(report["group_version"], "apps/v1");
    assert!(report["lists"].as_u64().unwrap() >= 4 * 5, "{report}");
    for h in report["per_handler"].as_array().unwrap() {
        assert!(h["tombstones"].as_u64().unwrap() >= 3, "{h}");
    }
}
