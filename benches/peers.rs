//! Side by side, each as its own process on the same server and the same stream, in one run:
//! (a) `raw`, a raw drain of the same bytes (list pages fetched and dropped, watch frames
//! skipped by their length prefix), (b) `informer`, ours over protobuf, (c) `client-go`, the
//! real `k8s.io/client-go` v0.37 `SharedIndexInformer` over protobuf (`interop/client-go`),
//! (d) `kube-runtime`, kube-rs's `watcher` + `reflector` over JSON. (b), (c) and (d) run 4
//! handlers that each keep a view (key → resourceVersion).
//!
//! Phases, for the HEAD Pod (13.6 KB protobuf) and the real etcd Pod (1.5 KB):
//! 1. watch throughput: a simulator (`informer serve`'s server, in this process) holding 1 000
//!    objects; each consumer lists, opens its watch (held by the server), the server makes
//!    `--events` changes, the hold is released and the consumer drains the backlog; it reports
//!    events/s and CPU seconds per million events over the drain;
//! 2. memory: a simulator holding `--list-objects` (100 000) objects; each consumer lists
//!    them and reports its RSS one second after it synced, less its RSS at start, per object.
//!
//! 3. Then a real kube-apiserver with etcd (`interop/apiserver`): `--real-pods` (20 000) Pods
//!    created through the API, and each consumer's initial list of them: time to sync, CPU,
//!    RSS per object.
//!
//! Run: `cargo bench --bench peers` (about 5 minutes on 2 cores; `-- --quick` for a smaller
//! run, `-- --help` for the knobs). The consumers' protocol is in `peers/consumer.rs`.

// The bench has no public items to document.
#![allow(missing_docs)]

#[path = "peers/consumer.rs"]
mod consumer;
#[path = "../tests/interop/mod.rs"]
mod interop;
#[path = "../tests/kube_apiserver/mod.rs"]
mod kube_apiserver;
#[path = "common/raw_frames.rs"]
mod raw_frames;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use consumer::Report;
use informer::server::{ServerConfig, ServerHandle, serve};
use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    match std::env::var("PEERS_ROLE") {
        Ok(role) => consumer::run(&role),
        Err(_) => harness(Options::parse()),
    }
}

/// What the run measures (command-line flags after `--`).
#[derive(Debug)]
struct Options {
    /// Watch events drained per consumer, per template (etcd Pod, HEAD Pod).
    events: (u64, u64),
    /// Objects of the memory phase.
    list_objects: usize,
    /// Pods created on the real kube-apiserver (0 = skip that phase).
    real_pods: usize,
    templates: Vec<String>,
    peers: Vec<String>,
    /// Seconds between a consumer's sync and its memory report.
    settle: f64,
}

impl Options {
    fn parse() -> Self {
        let mut o = Options {
            events: (200_000, 40_000),
            list_objects: 100_000,
            real_pods: 20_000,
            templates: vec!["etcd-pod".into(), "head-pod".into()],
            peers: ["raw", "informer", "client-go", "kube-runtime"]
                .map(String::from)
                .to_vec(),
            settle: 1.0,
        };
        let mut args = std::env::args().skip(1);
        let list = |v: String| {
            v.split(',')
                .filter(|t| !t.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        };
        while let Some(a) = args.next() {
            let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
            match a.as_str() {
                "--bench" => {}
                "--quick" => {
                    o.events = (20_000, 4_000);
                    o.list_objects = 10_000;
                    o.real_pods = 2_000;
                }
                "--events" => {
                    let n = value().parse().unwrap();
                    o.events = (n, n);
                }
                "--list-objects" => o.list_objects = value().parse().unwrap(),
                "--real-pods" => o.real_pods = value().parse().unwrap(),
                "--templates" => o.templates = list(value()),
                "--peers" => o.peers = list(value()),
                "--settle" => o.settle = value().parse().unwrap(),
                "--help" | "-h" => {
                    println!(
                        "cargo bench --bench peers -- [--quick] [--events N] [--list-objects N] \
                         [--real-pods N (0 = skip)] [--templates etcd-pod,head-pod] \
                         [--peers raw,informer,client-go,kube-runtime] [--settle SECS]"
                    );
                    std::process::exit(0);
                }
                other => panic!("unknown flag {other} (--help)"),
            }
        }
        o
    }
}

/// Where a consumer connects.
enum Target<'a> {
    /// A plain-HTTP simulator.
    Sim(&'a str),
    /// A kubeconfig, and the namespace to list.
    Kube(&'a std::path::Path, &'a str),
}

/// A running consumer: its stdin for the command, its stdout lines.
struct Session {
    peer: String,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Session {
    fn start(peer: &str, target: &Target<'_>) -> Session {
        let mut cmd = if peer == "client-go" {
            let mut c = Command::new(interop::binary("client-go"));
            // client-go's client-side rate limit (5 requests/s, burst 10, when unset) would
            // throttle its paginated lists: raised, as controllers do, to measure the informer.
            c.args(["--resource", "pods", "--handlers", "4", "--peer-protocol"])
                .args(["--qps", "1000", "--burst", "1000"]);
            match target {
                Target::Sim(url) => c.args(["--server", url]),
                Target::Kube(k, ns) => c.arg("--kubeconfig").arg(k).args(["--namespace", ns]),
            };
            c
        } else {
            let mut c = Command::new(std::env::current_exe().unwrap());
            c.env("PEERS_ROLE", peer).env("PEERS_HANDLERS", "4");
            match target {
                Target::Sim(url) => c.env("PEERS_SERVER", url),
                Target::Kube(k, ns) => c.env("PEERS_KUBECONFIG", k).env("PEERS_NAMESPACE", ns),
            };
            c
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {peer}: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in stdout.lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Session {
            peer: peer.to_owned(),
            child,
            stdin,
            lines,
        }
    }

    fn line(&mut self, what: &str) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(900))
            .unwrap_or_else(|_| panic!("{}: no {what} ({:?})", self.peer, self.child.try_wait()))
    }

    /// Waits for `synced <objects>`.
    fn synced(&mut self) -> u64 {
        let l = self.line("synced line");
        l.strip_prefix("synced ")
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{}: expected `synced N`, got {l:?}", self.peer))
    }

    fn command(&mut self, c: &str) {
        writeln!(self.stdin, "{c}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn report(mut self) -> Report {
        let l = self.line("report");
        let r =
            serde_json::from_str(&l).unwrap_or_else(|e| panic!("{}: report {l:?}: {e}", self.peer));
        let _ = self.child.wait();
        r
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("server")
        .enable_all()
        .build()
        .unwrap()
}

/// A loopback server over a simulator of `template` holding `objects`, with room in its
/// history for `events` changes.
fn sim_server(
    rt: &tokio::runtime::Runtime,
    template: &str,
    objects: usize,
    events: u64,
) -> (SimServer, ServerHandle) {
    let dir = default_fixtures_dir().unwrap();
    // The template and its JSON twin (the same object, for JSON clients: kube-runtime).
    let (templates, twin) = match template {
        "etcd-pod" => (
            Templates::etcd_pod(&dir),
            "real/auger-etcd-real-protobuf/json__pod.json",
        ),
        "head-pod" => (
            Templates::head_pod(&dir),
            "k8s-testdata/HEAD/core.v1.Pod.json",
        ),
        other => panic!("unknown template {other}"),
    };
    let twin = informer::object::decode(std::fs::read(dir.join(twin)).unwrap().into()).unwrap();
    let sim = SimServer::new(
        SimConfig::new(templates.unwrap())
            .seed(11)
            .initial_objects(objects)
            .target_objects(objects)
            .history_window(events as usize + 1_000)
            .flow_control(true),
    )
    .unwrap();
    let handle = rt
        .block_on(serve(
            sim.clone(),
            ServerConfig::default().json_twins(vec![twin]),
            "127.0.0.1:0".parse().unwrap(),
        ))
        .unwrap();
    (sim, handle)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn ratio(ours: f64, peer: f64) -> String {
    if peer > 0.0 && ours > 0.0 {
        format!("{:.2}", ours / peer)
    } else {
        "-".into()
    }
}

/// Phase 1 for one template: events/s and CPU per million events of each consumer.
fn throughput(o: &Options, template: &str, events: u64) -> Vec<(String, Report)> {
    let rt = runtime();
    let (sim, handle) = sim_server(&rt, template, 1_000, events);
    let url = handle.url();
    let mut out = Vec::new();
    for peer in &o.peers {
        handle.hold_watches(true);
        let before = handle.stats().watches.load(Ordering::SeqCst);
        let mut s = Session::start(peer, &Target::Sim(&url));
        s.synced();
        let deadline = Instant::now() + Duration::from_secs(120);
        while handle.stats().watches.load(Ordering::SeqCst) <= before {
            assert!(Instant::now() < deadline, "{peer} never opened its watch");
            std::thread::sleep(Duration::from_millis(2));
        }
        let target = sim.step(events).unwrap();
        s.command(&format!("until-rv {target} {events}"));
        handle.hold_watches(false);
        let r = s.report();
        assert!(
            r.events >= events,
            "{peer}: {} of {events} events",
            r.events
        );
        out.push((peer.clone(), r));
    }
    rt.block_on(handle.shutdown());
    print_throughput(template, events, &out);
    out
}

fn print_throughput(template: &str, events: u64, rows: &[(String, Report)]) {
    println!(
        "\n== watch drain: {template}, {events} events from a held backlog, 1 000 objects, 4 handlers"
    );
    println!(
        "{:<14}{:>12}{:>16}{:>12}   ours ÷ peer: events/s, CPU per event",
        "consumer", "events/s", "CPU s / M ev", "peak RSS"
    );
    let ours = rows.iter().find(|(p, _)| p == "informer").map(|(_, r)| r);
    for (peer, r) in rows {
        let rate = r.events as f64 / r.watch_seconds;
        let cpu = r.watch_cpu_seconds / r.events as f64 * 1e6;
        let vs = match ours {
            Some(us) if peer != "informer" => format!(
                "{}, {}",
                ratio(us.events as f64 / us.watch_seconds, rate),
                ratio(us.watch_cpu_seconds / us.events as f64 * 1e6, cpu)
            ),
            _ => String::new(),
        };
        println!(
            "{peer:<14}{rate:>12.0}{cpu:>16.2}{:>9.0} MiB   {vs}",
            mib(r.peak_rss_bytes)
        );
    }
}

/// One consumer's initial list against `target`: synced, `settle` seconds, then its report.
fn list_once(peer: &str, target: &Target<'_>, settle: f64) -> Report {
    let mut s = Session::start(peer, target);
    s.synced();
    std::thread::sleep(Duration::from_secs_f64(settle));
    s.command("report");
    s.report()
}

/// RSS after the list, less RSS at start, per object: includes the process's fixed costs.
fn rss_per_object(r: &Report) -> f64 {
    r.rss_bytes.saturating_sub(r.rss_start_bytes) as f64 / r.objects.max(1) as f64
}

/// What one more cached object costs: the RSS difference between the list of `full` and of
/// `half` the objects, per object of the difference (fixed costs cancel out).
fn marginal_rss(full: &Report, half: &Report) -> f64 {
    (full.rss_bytes as f64 - half.rss_bytes as f64) / (full.objects as f64 - half.objects as f64)
}

/// Prints one list phase: each consumer's full list, and per object both the RSS over the
/// list and the marginal cost against the half-size list (`half`, same order).
fn print_lists(title: &str, rows: &[(String, Report)], half: &[(String, Report)]) {
    println!("\n== {title}");
    println!(
        "{:<14}{:>10}{:>10}{:>12}{:>10}{:>12}{:>16}   ours ÷ peer: sync time, CPU, marginal RSS/object",
        "consumer", "objects", "sync s", "sync CPU s", "RSS MiB", "RSS B/obj", "marginal B/obj"
    );
    let marginal: Vec<f64> = rows
        .iter()
        .zip(half)
        .map(|((_, full), (_, half))| marginal_rss(full, half))
        .collect();
    if rows.iter().any(|(_, r)| r.objects < 50_000) {
        println!(
            "(lists this small: fixed costs and the allocator's growth steps dominate the RSS \
             figures; read them at the default 100 000 objects)"
        );
    }
    let ours = rows.iter().position(|(p, _)| p == "informer");
    for (i, (peer, r)) in rows.iter().enumerate() {
        let vs = match ours {
            Some(u) if u != i => {
                let us = &rows[u].1;
                format!(
                    "{}, {}, {}",
                    ratio(us.sync_seconds, r.sync_seconds),
                    ratio(us.sync_cpu_seconds, r.sync_cpu_seconds),
                    ratio(marginal[u], marginal[i])
                )
            }
            _ => String::new(),
        };
        println!(
            "{peer:<14}{:>10}{:>10.2}{:>12.2}{:>10.0}{:>12.0}{:>16.0}   {vs}",
            r.objects,
            r.sync_seconds,
            r.sync_cpu_seconds,
            mib(r.rss_bytes),
            rss_per_object(r),
            marginal[i]
        );
    }
}

/// Phase 2 for one template: RSS after lists of half and all `--list-objects` objects.
fn memory(o: &Options, template: &str) {
    let rt = runtime();
    let mut runs = Vec::new();
    for objects in [o.list_objects / 2, o.list_objects] {
        let (_sim, handle) = sim_server(&rt, template, objects, 0);
        let url = handle.url();
        let rows: Vec<_> = o
            .peers
            .iter()
            .map(|p| (p.clone(), list_once(p, &Target::Sim(&url), o.settle)))
            .collect();
        rt.block_on(handle.shutdown());
        runs.push(rows);
    }
    print_lists(
        &format!(
            "memory: {template}, lists of {} and {} objects",
            o.list_objects / 2,
            o.list_objects
        ),
        &runs[1],
        &runs[0],
    );
}

/// Phase 3: `--real-pods` Pods created through a real kube-apiserver in two namespaces of half
/// each; each consumer lists one namespace (half), then all (full).
fn real_apiserver(o: &Options) {
    use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
    use kube::api::{Api, ObjectMeta, PostParams};
    let server = kube_apiserver::KubeApiServer::start(&[]);
    let rt = runtime();
    let created = Instant::now();
    let ns = rt.block_on(async {
        let client = server.client().await;
        let half = kube_apiserver::namespace(&client, "peers").await;
        let rest = kube_apiserver::namespace(&client, "peers").await;
        let (a, b): (Api<Pod>, Api<Pod>) = (
            Api::namespaced(client.clone(), &half),
            Api::namespaced(client, &rest),
        );
        kube_apiserver::each((0..o.real_pods).collect(), 32, move |i| {
            let api = if i % 2 == 0 { a.clone() } else { b.clone() };
            async move {
                let pod = Pod {
                    metadata: ObjectMeta {
                        name: Some(format!("pod-{i}")),
                        labels: Some([("app".to_owned(), format!("app-{}", i % 50))].into()),
                        ..Default::default()
                    },
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "main".into(),
                            image: Some("registry.k8s.io/pause:3.10".into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &pod).await
            }
        })
        .await;
        println!(
            "\n{} Pods created through the real API in {:.1} s (namespaces {half}, {rest})",
            o.real_pods,
            created.elapsed().as_secs_f64()
        );
        half
    });
    let runs: Vec<Vec<_>> = [ns.as_str(), ""]
        .iter()
        .map(|ns| {
            o.peers
                .iter()
                .map(|p| {
                    let target = Target::Kube(&server.kubeconfig, ns);
                    (p.clone(), list_once(p, &target, o.settle))
                })
                .collect()
        })
        .collect();
    print_lists(
        &format!(
            "real kube-apiserver v1.37: initial lists of {} and {} Pods",
            o.real_pods / 2,
            o.real_pods
        ),
        &runs[1],
        &runs[0],
    );
}

fn harness(o: Options) {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "peers: {} cores, load {}, {:?}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        o
    );
    for t in &o.templates {
        let events = if t == "head-pod" {
            o.events.1
        } else {
            o.events.0
        };
        throughput(&o, t, events);
        memory(&o, t);
    }
    if o.real_pods > 0 {
        real_apiserver(&o);
    }
}
