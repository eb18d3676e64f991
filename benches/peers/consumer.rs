//! The Rust consumers of the peer bench, each run as its own process (the bench binary
//! re-executed with `PEERS_ROLE`): `raw` (a raw drain of the same bytes), `informer` (ours,
//! protobuf) and `kube-runtime` (kube-rs's `watcher` + `reflector`, JSON). `interop/client-go`
//! speaks the same protocol:
//!
//! 1. list (and, but for `raw` against a real server, watch) the resource, then print
//!    `synced <objects>` on stdout;
//! 2. read one command line from stdin: `until-rv <R> <E>` (wait until every handler has seen
//!    resourceVersion `R`, `E` events after the list; `raw` counts `E` frames) or `report`;
//! 3. print one JSON report line ([`Report`]) and exit.
//!
//! Environment: `PEERS_SERVER` (URL, no credentials) or `PEERS_KUBECONFIG`, `PEERS_NAMESPACE`
//! (default: all), `PEERS_HANDLERS` (default 4).

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cpu_time::ProcessTime;
use informer::client::{ApiResource, ClientOptions, HttpListerWatcher};
use informer::distributor::EventHandler;
use informer::fifo::DeltaObject;
use informer::object::{Object, ObjectKey, parse_resource_version};
use informer::{HandlerOptions, Informer, InformerConfig};

use crate::raw_frames::RawFrames;

/// What every consumer prints at the end (one JSON object; `interop/client-go` prints the same
/// fields).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Report {
    /// Objects in the cache at the report (for `raw`: items listed).
    pub(crate) objects: u64,
    /// Process start to synced.
    pub(crate) sync_seconds: f64,
    /// CPU (user + system) of the process from start to synced.
    pub(crate) sync_cpu_seconds: f64,
    /// Resident set size before the first request.
    pub(crate) rss_start_bytes: u64,
    /// Resident set size at the report.
    pub(crate) rss_bytes: u64,
    /// Peak resident set size (`VmHWM`).
    pub(crate) peak_rss_bytes: u64,
    /// Watch events each handler handled after the command (0 for `report`).
    pub(crate) events: u64,
    /// Command to the last event handled by every handler.
    pub(crate) watch_seconds: f64,
    /// CPU of the process over the same time.
    pub(crate) watch_cpu_seconds: f64,
}

fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

fn cpu() -> f64 {
    ProcessTime::now().as_duration().as_secs_f64()
}

/// The command read after `synced`.
enum Command {
    UntilRv { rv: u64, events: u64 },
    Report,
}

fn synced_then_command(objects: usize) -> Command {
    println!("synced {objects}");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["until-rv", rv, events] => Command::UntilRv {
            rv: rv.parse().unwrap(),
            events: events.parse().unwrap(),
        },
        ["report"] => Command::Report,
        other => panic!("unknown command {other:?}"),
    }
}

fn print_report(r: &Report) {
    println!("{}", serde_json::to_string(r).unwrap());
    std::io::stdout().flush().unwrap();
}

/// Runs the consumer `role` to its report; exits the process.
pub(crate) fn run(role: &str) {
    let rss_start_bytes = status_kib("VmRSS:");
    let (t0, c0) = (Instant::now(), cpu());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = ClientOptions {
        kubeconfig: std::env::var_os("PEERS_KUBECONFIG").map(Into::into),
        server: std::env::var("PEERS_SERVER").ok(),
        ..Default::default()
    };
    let client = rt.block_on(options.client()).unwrap();
    let namespace = std::env::var("PEERS_NAMESPACE").unwrap_or_default();
    let handlers: usize = std::env::var("PEERS_HANDLERS").map_or(4, |h| h.parse().unwrap());
    let start = Start {
        t0,
        c0,
        rss_start_bytes,
    };
    let report = match role {
        "raw" => raw(&rt, client, &namespace, &start),
        "informer" => ours(&rt, client, &namespace, handlers, &start),
        "kube-runtime" => kube_runtime(&rt, client, &namespace, handlers, &start),
        other => panic!("unknown PEERS_ROLE {other}"),
    };
    print_report(&report);
    // The caches are not torn down: the report is out, the process ends.
    std::process::exit(0);
}

struct Start {
    t0: Instant,
    c0: f64,
    rss_start_bytes: u64,
}

impl Start {
    /// The report's sync half, taken now.
    fn synced(&self, objects: u64) -> Report {
        Report {
            objects,
            sync_seconds: self.t0.elapsed().as_secs_f64(),
            sync_cpu_seconds: cpu() - self.c0,
            rss_start_bytes: self.rss_start_bytes,
            ..Default::default()
        }
    }
}

/// Fills the report's end: RSS now and at peak, and the watch half from `(t1, c1)`.
fn finish(mut r: Report, watch: Option<(Instant, f64, u64)>) -> Report {
    if let Some((t1, c1, events)) = watch {
        r.watch_seconds = t1.elapsed().as_secs_f64();
        r.watch_cpu_seconds = cpu() - c1;
        r.events = events;
    }
    r.rss_bytes = status_kib("VmRSS:");
    r.peak_rss_bytes = status_kib("VmHWM:");
    r
}

/// The list pages' `metadata` only (`ListMeta` is field 1 of a protobuf list; the items,
/// field 2, are skipped by prost without being decoded).
#[derive(Clone, PartialEq, prost::Message)]
struct ListHead {
    #[prost(message, optional, tag = "1")]
    metadata: Option<informer::wire::meta::ListMeta>,
}

/// `raw`: every list page fetched as protobuf and dropped (only its `ListMeta` read, for the
/// continue token); then, against the simulator's plain-HTTP server, the watch read with
/// blocking socket reads, frames counted by their length prefix.
fn raw(rt: &tokio::runtime::Runtime, client: kube::Client, ns: &str, start: &Start) -> Report {
    use prost::Message;
    let resource = ApiResource::core("v1", "pods", "Pod").in_namespace(ns);
    let path = resource.collection_path();
    let mut token = String::new();
    let mut rv = String::new();
    let mut items = 0u64;
    loop {
        let uri = format!("{path}?limit=500&resourceVersion=0&continue={token}");
        let body: Bytes = rt.block_on(async {
            let req = http::Request::get(&uri)
                .header("Accept", "application/vnd.kubernetes.protobuf")
                .body(Vec::new())
                .unwrap();
            let resp = client.send(req.map(Into::into)).await.unwrap();
            assert!(resp.status().is_success(), "{uri}: {}", resp.status());
            http_body_util::BodyExt::collect(resp.into_body())
                .await
                .unwrap()
                .to_bytes()
        });
        // Magic, then the `runtime.Unknown` envelope whose field 2 is the list message.
        let unknown = informer::wire::runtime::Unknown::decode(&body[4..]).unwrap();
        let raw = unknown.raw.unwrap_or_default();
        let head = ListHead::decode(&raw[..]).unwrap();
        items += count_items(&raw);
        let meta = head.metadata.unwrap_or_default();
        rv = meta.resource_version.unwrap_or(rv);
        token = meta.r#continue.unwrap_or_default();
        if token.is_empty() {
            break;
        }
    }
    let report = start.synced(items);
    let Some(server) = std::env::var("PEERS_SERVER").ok() else {
        // A real server (TLS): list only.
        return match synced_then_command(items as usize) {
            Command::Report => finish(report, None),
            Command::UntilRv { .. } => panic!("raw watches only the plain-HTTP simulator"),
        };
    };
    let addr = server.trim_start_matches("http://").to_owned();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_nodelay(true).unwrap();
    write!(
        s,
        "GET {path}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true HTTP/1.1\r\nHost: {addr}\r\nAccept: application/vnd.kubernetes.protobuf;stream=watch\r\n\r\n"
    )
    .unwrap();
    let mut buf = vec![1u8; 256 * 1024];
    match synced_then_command(items as usize) {
        Command::Report => finish(report, None),
        Command::UntilRv { events, .. } => {
            use std::io::Read;
            let (t1, c1) = (Instant::now(), cpu());
            let mut frames = RawFrames::default();
            while frames.frames < events {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the server closed the watch");
                frames.feed(&buf[..n]);
            }
            finish(report, Some((t1, c1, frames.frames)))
        }
    }
}

/// Items in a protobuf list message: the occurrences of field 2 at its top level.
fn count_items(list: &[u8]) -> u64 {
    let mut n = 0;
    let mut rest = list;
    while !rest.is_empty() {
        let (key, after) = varint(rest);
        let (len, after) = varint(after);
        assert_eq!(key & 7, 2, "a list holds only length-delimited fields");
        if key >> 3 == 2 {
            n += 1;
        }
        rest = &after[len as usize..];
    }
    n
}

fn varint(b: &[u8]) -> (u64, &[u8]) {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return (v, &b[i + 1..]);
        }
    }
    panic!("bad varint");
}

/// Counts handlers that saw the target resourceVersion and wakes the waiting thread when the
/// last one did (the wait costs no CPU while the handlers run).
struct Done {
    target: AtomicU64,
    remaining: AtomicUsize,
    /// Per handler: the newest resourceVersion it saw, and whether it was counted.
    last: Vec<AtomicU64>,
    reached: Vec<AtomicBool>,
    waiter: std::thread::Thread,
}

impl Done {
    fn new(handlers: usize) -> Arc<Self> {
        Arc::new(Done {
            target: AtomicU64::new(u64::MAX),
            remaining: AtomicUsize::new(handlers),
            last: (0..handlers).map(|_| AtomicU64::new(0)).collect(),
            reached: (0..handlers).map(|_| AtomicBool::new(false)).collect(),
            waiter: std::thread::current(),
        })
    }

    /// Counts handler `i` once, when its newest version is at or past the target.
    fn check(&self, i: usize) {
        if self.last[i].load(Ordering::Acquire) >= self.target.load(Ordering::Acquire)
            && !self.reached[i].swap(true, Ordering::AcqRel)
            && self.remaining.fetch_sub(1, Ordering::AcqRel) == 1
        {
            self.waiter.unpark();
        }
    }

    /// Handler `i` has seen `rv`.
    fn saw(&self, i: usize, rv: u64) {
        self.last[i].fetch_max(rv, Ordering::AcqRel);
        self.check(i);
    }

    /// Parks until every handler has seen `target` (at most 10 minutes).
    fn wait(&self, target: u64) {
        self.target.store(target, Ordering::Release);
        // Handlers already past the target before it was set.
        for i in 0..self.last.len() {
            self.check(i);
        }
        let deadline = Instant::now() + Duration::from_secs(600);
        while self.remaining.load(Ordering::Acquire) > 0 {
            assert!(Instant::now() < deadline, "handlers never reached {target}");
            std::thread::park_timeout(Duration::from_millis(50));
        }
    }
}

/// A handler that keeps its own view (key → the object it last saw, whose resourceVersion it
/// can read), as a controller's handler that tracks what it has seen. `interop/client-go`'s
/// handlers do the same: their map's resourceVersion strings share the objects' memory, as
/// the `Arc`s here share the cache's objects and keys.
struct View {
    objects: HashMap<ObjectKey, Arc<Object>>,
    events: Arc<AtomicU64>,
    index: usize,
    done: Arc<Done>,
}

impl View {
    fn saw(&mut self, o: &Object) {
        self.events.fetch_add(1, Ordering::Relaxed);
        if let Some(rv) = parse_resource_version(o.resource_version()) {
            self.done.saw(self.index, rv);
        }
    }
}

impl EventHandler for View {
    fn on_add(&mut self, obj: &Arc<Object>, _: bool) {
        self.objects.insert(obj.key(), obj.clone());
        self.saw(obj);
    }
    fn on_update(&mut self, _: &Arc<Object>, new: &Arc<Object>) {
        self.objects.insert(new.key(), new.clone());
        self.saw(new);
    }
    fn on_delete(&mut self, obj: &DeltaObject) {
        self.objects.remove(&obj.key());
        self.saw(obj.object());
    }
}

/// `informer`: ours, protobuf, `handlers` handlers keeping views.
fn ours(
    rt: &tokio::runtime::Runtime,
    client: kube::Client,
    ns: &str,
    handlers: usize,
    start: &Start,
) -> Report {
    let lw = HttpListerWatcher::new(
        client,
        ApiResource::core("v1", "pods", "Pod").in_namespace(ns),
    );
    let informer = Informer::new(lw, InformerConfig::default());
    let done = Done::new(handlers);
    let mut counts = Vec::new();
    for i in 0..handlers {
        let events = Arc::new(AtomicU64::new(0));
        counts.push(events.clone());
        let view = View {
            objects: HashMap::new(),
            events,
            index: i,
            done: done.clone(),
        };
        informer
            .add_event_handler(view, HandlerOptions::new().name(format!("view-{i}")))
            .unwrap();
    }
    informer.start(rt.handle());
    rt.block_on(informer.wait_for_cache_sync(Duration::from_secs(600)))
        .unwrap();
    // Synced: the store holds the list and the handlers have handled it. The server holds
    // the watch until the command is sent, so nothing more arrives before it.
    informer.flush();
    let objects = informer.store().len();
    let report = start.synced(objects as u64);
    // Events of the first handler (0 handlers: the watch phase is not measured).
    let handled = || counts.first().map_or(0, |c| c.load(Ordering::Relaxed));
    let before = handled();
    match synced_then_command(objects) {
        Command::Report => finish(report, None),
        Command::UntilRv { rv, .. } => {
            let (t1, c1) = (Instant::now(), cpu());
            done.wait(rv);
            let events = handled() - before;
            finish(report, Some((t1, c1, events)))
        }
    }
}

/// `kube-runtime`: kube-rs's `watcher` + `reflector` over JSON into its store; each event is
/// then applied to `handlers` views in turn (kube-runtime has no handler fan-out: a
/// controller's own loop does this).
fn kube_runtime(
    rt: &tokio::runtime::Runtime,
    client: kube::Client,
    ns: &str,
    handlers: usize,
    start: &Start,
) -> Report {
    use futures_util::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube_runtime::{WatchStreamExt, reflector, watcher};
    let api: kube::Api<Pod> = if ns.is_empty() {
        kube::Api::all(client)
    } else {
        kube::Api::namespaced(client, ns)
    };
    let (reader, writer) = reflector::store::<Pod>();
    let events = Arc::new(AtomicU64::new(0));
    let done = Done::new(1);
    let synced = Arc::new(tokio::sync::Notify::new());
    let (e, d, s) = (events.clone(), done.clone(), synced.clone());
    rt.spawn(async move {
        let mut views: Vec<HashMap<String, String>> = vec![HashMap::new(); handlers];
        let stream = watcher(api, watcher::Config::default()).reflect(writer);
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            let (pod, delete) = match ev {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => (p, false),
                Ok(watcher::Event::Delete(p)) => (p, true),
                Ok(watcher::Event::InitDone) => {
                    s.notify_one();
                    continue;
                }
                Ok(watcher::Event::Init) | Err(_) => continue,
            };
            let key = format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or(""),
                pod.metadata.name.as_deref().unwrap_or("")
            );
            let rv = pod.metadata.resource_version.clone().unwrap_or_default();
            for view in &mut views {
                if delete {
                    view.remove(&key);
                } else {
                    view.insert(key.clone(), rv.clone());
                }
            }
            e.fetch_add(1, Ordering::Relaxed);
            if let Some(v) = parse_resource_version(&rv) {
                d.saw(0, v);
            }
        }
    });
    rt.block_on(synced.notified());
    let objects = reader.state().len();
    let report = start.synced(objects as u64);
    let before = events.load(Ordering::Relaxed);
    match synced_then_command(objects) {
        Command::Report => finish(report, None),
        Command::UntilRv { rv, .. } => {
            let (t1, c1) = (Instant::now(), cpu());
            done.wait(rv);
            let n = events.load(Ordering::Relaxed) - before;
            finish(report, Some((t1, c1, n)))
        }
    }
}
