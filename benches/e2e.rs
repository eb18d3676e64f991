//! End to end over HTTP: one loopback `informer serve` server (the HEAD Pod fixture re-keyed,
//! ~13.5 KB per object), the same backlog of watch events drained by six clients in the same
//! run:
//!
//! - (a) `raw-socket-drain`: blocking reads of the protobuf watch response on a plain TCP
//!   socket into one reused buffer, frames skipped by their length prefix (the physical limit
//!   of this server, socket and machine);
//! - (b) `informer-protobuf-metadata`: our informer (HttpListerWatcher → reflector → DeltaFIFO
//!   → store → one handler) over protobuf, objects decoded metadata-only; (b')
//!   `informer-protobuf-metadata-reflector-thread`: the same with the reflector on a thread of
//!   its own (`InformerConfig::reflector_thread`) instead of on the 2-worker client runtime;
//! - (c) `informer-protobuf-typed`: the same, the handler decoding every object into a typed
//!   `k8s_pb` Pod;
//! - (d) `informer-json`: our informer over JSON (same handler as (b));
//! - (e) `kube-runtime-json`: kube-rs's `watcher` + `reflector` (typed `k8s_openapi` Pods over
//!   JSON, the only encoding it speaks).
//!
//! Each iteration: the client lists and opens its watch while the server holds watch bodies
//! (`ServerHandle::hold_watches`), the server makes `EVENTS` changes, then the timer starts,
//! the hold is released and the timer stops when the client has seen the last change. Setup
//! (list, generating the events) is not timed. Throughput is events/s; bytes per event of each
//! encoding are printed at start.
//!
//! Diagnostics (environment variables, all off by default): `E2E_THREADSTATS=1` prints, per
//! client (HTTP and in process), each thread's CPU time, run-queue wait, timeslices, context switches and minor
//! page faults over the timed regions only (from `/proc/self/task`, read just before the
//! release and just after the last change is seen); `E2E_SKIP_PROBE=1` skips the bytes-per-event probe (for
//! profiling); `E2E_CHUNK_BYTES=N` sets the simulator's largest watch chunk (default 64 KiB;
//! 1 = one event per HTTP chunk, as a kube-apiserver writes a backlog).
//! `E2E_RAW_MODE=tokio` runs (a)'s read loop as a future on the client runtime instead of
//! blocking reads on the bench thread (about a fifth slower).
//!
//! Then `e2e-inproc/<size>`, without HTTP for our side: the simulator itself is the
//! `ListerWatcher` (its watch bodies held until released), for the real etcd Pod (1.5 KB) and
//! the HEAD Pod (13.6 KB): a raw drain of the simulator's chunks (frames skipped by length),
//! our informer with 1, 4 and 16 handlers, and kube-runtime's `watcher` + `reflector` over a
//! loopback server's JSON (the etcd Pod's JSON twin is the fixture's own `json__pod.json`).

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::StreamExt;
use informer::client::{ApiResource, ClientOptions, HttpListerWatcher};
use informer::distributor::EventHandler;
use informer::fifo::{DeltaObject, FifoKind};
use informer::object::{Object, parse_resource_version};
use informer::reflector::{
    ApiError, Body, ListOptions, ListerWatcher, WatchOptions, WatchResponse,
};
use informer::server::{ServerConfig, ServerHandle, serve};
use informer::sim::{SimConfig, SimServer, SimWatch, Templates, default_fixtures_dir};
use informer::{HandlerOptions, Informer, InformerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "common/raw_frames.rs"]
mod raw_frames;
use raw_frames::RawFrames;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Events drained per iteration.
const EVENTS: u64 = 4_000;
/// Objects on the server (listed, untimed, before each iteration).
const OBJECTS: usize = 500;

struct Env {
    server_rt: tokio::runtime::Runtime,
    client_rt: tokio::runtime::Runtime,
    sim: SimServer,
    handle: ServerHandle,
}

/// The real etcd Pod's JSON form, written by the same upstream project (auger) from the same
/// stored object as `storage__pod.bin` (fixtures README); `Env::etcd_pod` checks the pairing.
const ETCD_POD_JSON: &str = "real/auger-etcd-real-protobuf/json__pod.json";

impl Env {
    /// The HEAD Pod (13.6 KB) and its `core.v1.Pod.json` twin.
    fn new() -> Self {
        let dir = default_fixtures_dir().unwrap();
        Self::with(
            Templates::head_pod(&dir).unwrap(),
            &dir.join("k8s-testdata/HEAD/core.v1.Pod.json"),
            3,
        )
    }

    /// The real etcd Pod (1.5 KB protobuf) and its JSON twin, after checking that both files
    /// are the same object (name, namespace, uid, resourceVersion, creation time to the second,
    /// labels, annotations, owner references).
    fn etcd_pod() -> Self {
        let dir = default_fixtures_dir().unwrap();
        let templates = Templates::etcd_pod(&dir).unwrap();
        let pb = templates.objects()[0].meta();
        let json = informer::object::decode(std::fs::read(dir.join(ETCD_POD_JSON)).unwrap().into())
            .unwrap();
        let js = json.meta();
        assert_eq!(
            (
                &pb.name(),
                &pb.namespace(),
                &pb.uid(),
                &pb.resource_version()
            ),
            (
                &js.name(),
                &js.namespace(),
                &js.uid(),
                &js.resource_version()
            ),
        );
        // JSON writes times to the second; the stored protobuf keeps the nanoseconds.
        let secs = |m: &informer::object::ObjectMeta| m.creation_timestamp().map(|t| t.seconds);
        assert_eq!(secs(pb), secs(js));
        assert_eq!(pb.labels(), js.labels());
        assert_eq!(pb.annotations(), js.annotations());
        assert!(pb.owner_references().eq(js.owner_references()));
        Self::with(templates, &dir.join(ETCD_POD_JSON), 4)
    }

    /// A loopback server over a simulator of `templates`, answering JSON clients from `twin`.
    fn with(templates: Templates, twin: &std::path::Path, seed: u64) -> Self {
        let twin = informer::object::decode(std::fs::read(twin).unwrap().into()).unwrap();
        let sim = SimServer::new(
            SimConfig::new(templates)
                .seed(seed)
                .initial_objects(OBJECTS)
                .target_objects(OBJECTS)
                .history_window(4 * EVENTS as usize)
                .max_chunk_bytes(env_usize("E2E_CHUNK_BYTES").unwrap_or(64 * 1024))
                .flow_control(true),
        )
        .unwrap();
        let rt = |name: &str| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name(name)
                .enable_all()
                .build()
                .unwrap()
        };
        let server_rt = rt("server");
        let client_rt = rt("client");
        let handle = server_rt
            .block_on(serve(
                sim.clone(),
                ServerConfig::default().json_twins(vec![twin]),
                "127.0.0.1:0".parse().unwrap(),
            ))
            .unwrap();
        Env {
            server_rt,
            client_rt,
            sim,
            handle,
        }
    }

    fn url(&self) -> String {
        self.handle.url()
    }

    /// Waits until a watch was opened after `before` opened ones (the client's is held now).
    fn wait_for_watch(&self, before: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.handle.stats().watches.load(Ordering::SeqCst) <= before {
            assert!(
                Instant::now() < deadline,
                "the client never opened its watch"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// One timed drain: `start` sets the client up (list, watch held), then `EVENTS` changes
    /// are made, then the clock runs from the release until `done` says the client saw the
    /// last one. `done` returns the client's teardown (shutdown, dropping its cache), run after
    /// the clock stops: the figure is the time to see every change, as for the raw drain.
    fn drain<C, T: FnOnce()>(
        &self,
        start: impl FnOnce(&Self) -> C,
        done: impl FnOnce(&Self, C, u64) -> T,
    ) -> Duration {
        self.handle.hold_watches(true);
        let before = self.handle.stats().watches.load(Ordering::SeqCst);
        let client = start(self);
        self.wait_for_watch(before);
        let target = self.sim.step(EVENTS).unwrap();
        let ts = std::env::var_os("E2E_THREADSTATS").map(|_| thread_stats());
        let t0 = Instant::now();
        self.handle.hold_watches(false);
        let teardown = done(self, client, target);
        let took = t0.elapsed();
        if let Some(ts) = ts {
            stats_add(&ts, &thread_stats(), took);
        }
        teardown();
        took
    }

    fn client(&self) -> kube::Client {
        self.client_rt
            .block_on(
                ClientOptions {
                    server: Some(self.url()),
                    ..Default::default()
                }
                .client(),
            )
            .unwrap()
    }
}

/// The newest resourceVersion a client saw, and the waiting bench thread: the client unparks
/// it once it has seen the target, so the timed wait costs no CPU (a polling wait would take
/// one of the 2 cores' time from the client being measured).
struct Finish {
    last: AtomicU64,
    /// `u64::MAX` until the bench knows the last change's version.
    target: AtomicU64,
    waiter: std::thread::Thread,
}

impl Finish {
    /// Waited for by the current thread.
    fn new() -> Arc<Self> {
        Arc::new(Finish {
            last: AtomicU64::new(0),
            target: AtomicU64::new(u64::MAX),
            waiter: std::thread::current(),
        })
    }

    fn saw(&self, rv: u64) {
        self.last.fetch_max(rv, Ordering::AcqRel);
        if rv >= self.target.load(Ordering::Acquire) {
            self.waiter.unpark();
        }
    }

    fn last(&self) -> u64 {
        self.last.load(Ordering::Acquire)
    }

    /// Parks until a version at or past `target` was seen (at most 120 s).
    fn wait(&self, what: &str, target: u64) {
        self.target.store(target, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.last() < target {
            let now = Instant::now();
            assert!(now < deadline, "timed out waiting for {what}");
            std::thread::park_timeout(deadline - now);
        }
    }
}

/// Records the newest resourceVersion a handler saw; optionally decodes every object typed.
struct Seen {
    finish: Arc<Finish>,
    typed: bool,
}

impl Seen {
    fn see(&self, o: &Object) {
        if self.typed {
            let pod: k8s_pb::api::core::v1::Pod = o.decode().unwrap();
            assert!(pod.spec.is_some());
        }
        if let Some(rv) = parse_resource_version(o.resource_version()) {
            self.finish.saw(rv);
        }
    }
}

impl EventHandler for Seen {
    fn on_add(&mut self, obj: &Arc<Object>, _: bool) {
        self.see(obj);
    }
    fn on_update(&mut self, _: &Arc<Object>, new: &Arc<Object>) {
        self.see(new);
    }
    fn on_delete(&mut self, obj: &DeltaObject) {
        self.see(obj.object());
    }
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// (a): GET the protobuf watch on a plain socket, de-chunk, skip frames by length.
fn raw_drain(env: &Env) -> Duration {
    let addr = env.handle.local_addr();
    env.drain(
        |env| {
            let rv = env.sim.resource_version();
            let s = env.client_rt.block_on(async move {
                let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                s.set_nodelay(true).unwrap();
                let req = format!(
                    "GET /api/v1/pods?watch=1&resourceVersion={rv} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/vnd.kubernetes.protobuf\r\n\r\n"
                );
                s.write_all(req.as_bytes()).await.unwrap();
                s
            });
            // The read buffer is allocated and touched, and the mode read, before the clock
            // starts.
            let tokio_loop = std::env::var("E2E_RAW_MODE").as_deref() == Ok("tokio");
            (s, vec![1u8; 256 * 1024], tokio_loop)
        },
        |env, (s, mut buf, tokio_loop), _| {
            // Default: blocking reads on the bench thread (no runtime between the socket and
            // the loop: the fastest drain measured). `E2E_RAW_MODE=tokio`: the same loop as a
            // future on the client runtime (`block_on`), about a fifth slower.
            let s = if tokio_loop {
                env.client_rt.block_on(async move {
                    let mut s = s;
                    let mut frames = RawFrames::default();
                    while frames.frames < EVENTS {
                        let n = s.read(&mut buf).await.unwrap();
                        assert!(n > 0, "server closed the stream");
                        frames.feed(&buf[..n]);
                    }
                    s.into_std().unwrap()
                })
            } else {
                use std::io::Read;
                let mut s = s.into_std().unwrap();
                s.set_nonblocking(false).unwrap();
                let mut frames = RawFrames::default();
                while frames.frames < EVENTS {
                    let n = s.read(&mut buf).unwrap();
                    assert!(n > 0, "server closed the stream");
                    frames.feed(&buf[..n]);
                }
                s
            };
            move || drop(s)
        },
    )
}

/// (b), (b'), (c), (d): our informer over HTTP with one handler; its reflector on the client
/// runtime, or on a thread of its own (`InformerConfig::reflector_thread`).
fn informer_drain(env: &Env, protobuf: bool, typed: bool, reflector_thread: bool) -> Duration {
    let client = env.client();
    env.drain(
        |env| {
            let lw = HttpListerWatcher::new(
                client,
                ApiResource::core("v1", "pods", "Pod").with_protobuf(protobuf),
            );
            let config = InformerConfig {
                reflector_thread,
                ..Default::default()
            };
            let informer = Informer::new(lw, config);
            let last = Finish::new();
            informer
                .add_event_handler(
                    Seen {
                        finish: last.clone(),
                        typed,
                    },
                    HandlerOptions::new().name("seen"),
                )
                .unwrap();
            informer.start(env.client_rt.handle());
            (informer, last)
        },
        |_, (informer, last), target| {
            last.wait("the informer's handler", target);
            move || informer.shutdown()
        },
    )
}

/// (e): kube-runtime's watcher + reflector, typed `k8s_openapi` Pods over JSON.
fn kube_runtime_drain(env: &Env) -> Duration {
    use k8s_openapi::api::core::v1::Pod;
    use kube_runtime::{WatchStreamExt, reflector, watcher};
    let client = env.client();
    env.drain(
        |env| {
            let (reader, writer) = reflector::store::<Pod>();
            let last = Finish::new();
            let seen = last.clone();
            let api: kube::Api<Pod> = kube::Api::all(client);
            let task = env.client_rt.spawn(
                watcher(api, watcher::Config::default())
                    .reflect(writer)
                    .for_each(move |ev| {
                        if let Ok(watcher::Event::Apply(p) | watcher::Event::Delete(p)) = &ev
                            && let Some(rv) = p
                                .metadata
                                .resource_version
                                .as_deref()
                                .and_then(parse_resource_version)
                        {
                            seen.saw(rv);
                        }
                        async {}
                    }),
            );
            (task, reader, last)
        },
        |_, (task, reader, last), target| {
            last.wait("kube-runtime's reflector", target);
            assert!(reader.state().len() >= OBJECTS / 2);
            move || {
                task.abort();
                drop(reader);
            }
        },
    )
}

fn bytes_per_event(env: &Env) {
    // One drain of each encoding through our client, measuring the stream's bytes.
    for protobuf in [true, false] {
        let bytes = Arc::new(Mutex::new(0u64));
        let b = bytes.clone();
        let client = env.client();
        env.drain(
            |env| {
                let lw = HttpListerWatcher::new(
                    client,
                    ApiResource::core("v1", "pods", "Pod").with_protobuf(protobuf),
                );
                let informer = Informer::new(lw, InformerConfig::default());
                let last = Finish::new();
                informer
                    .add_event_handler(
                        Seen {
                            finish: last.clone(),
                            typed: false,
                        },
                        HandlerOptions::new().name("seen"),
                    )
                    .unwrap();
                informer.start(env.client_rt.handle());
                (informer, last)
            },
            |_, (informer, last), target| {
                last.wait("the informer", target);
                let m = informer.reflector_metrics().unwrap();
                *b.lock().unwrap() = m.watch_bytes.load(Ordering::Relaxed);
                move || informer.shutdown()
            },
        );
        let total = *bytes.lock().unwrap();
        eprintln!(
            "e2e: {} watch stream: {:.0} bytes per event ({} events, {} bytes incl. bookmarks)",
            if protobuf { "protobuf" } else { "JSON" },
            total as f64 / EVENTS as f64,
            EVENTS,
            total
        );
    }
}

// ----- in process (no HTTP) ---------------------------------------------------------------

/// The simulator as a [`ListerWatcher`] whose watch bodies send nothing until released, so a
/// backlog can be made before the clock starts (the in-process twin of
/// `ServerHandle::hold_watches`). Lists and watches are the simulator's own.
struct HeldSim {
    sim: SimServer,
    gate: tokio::sync::watch::Receiver<bool>,
    opened: Arc<AtomicU64>,
}

struct HeldBody {
    inner: SimWatch,
    gate: tokio::sync::watch::Receiver<bool>,
}

impl Body for HeldBody {
    async fn next_chunk(&mut self) -> Option<Result<bytes::Bytes, ApiError>> {
        // Cancel safe: waiting for the gate takes nothing.
        let _ = self.gate.wait_for(|open| *open).await;
        self.inner.next_chunk().await
    }
}

impl ListerWatcher for HeldSim {
    type Body = HeldBody;

    async fn list(&self, opts: &ListOptions) -> Result<bytes::Bytes, ApiError> {
        self.sim.list(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<HeldBody>, ApiError> {
        let resp = self.sim.watch(opts).await?;
        self.opened.fetch_add(1, Ordering::SeqCst);
        Ok(WatchResponse {
            format: resp.format,
            body: HeldBody {
                inner: resp.body,
                gate: self.gate.clone(),
            },
        })
    }
}

/// One object size for the in-process group: a simulator (protobuf), the gate of its held
/// watches, and for the kube-runtime baseline a loopback server with the JSON twins (when the
/// fixtures have them).
struct InProc {
    name: &'static str,
    sim: SimServer,
    gate: tokio::sync::watch::Sender<bool>,
    opened: Arc<AtomicU64>,
    http: Option<Env>,
}

impl InProc {
    fn new(name: &'static str, templates: Templates, http: Option<Env>) -> Self {
        let sim = SimServer::new(
            SimConfig::new(templates)
                .seed(5)
                .initial_objects(OBJECTS)
                .target_objects(OBJECTS)
                .history_window(4 * EVENTS as usize),
        )
        .unwrap();
        let (gate, _) = tokio::sync::watch::channel(false);
        InProc {
            name,
            sim,
            gate,
            opened: Arc::new(AtomicU64::new(0)),
            http,
        }
    }

    fn lister_watcher(&self) -> HeldSim {
        HeldSim {
            sim: self.sim.clone(),
            gate: self.gate.subscribe(),
            opened: self.opened.clone(),
        }
    }

    /// Holds watches, runs `start`, waits for its watch, makes `EVENTS` changes, then times
    /// from the release until `done` returns; the teardown `done` returns runs after the clock
    /// stops.
    fn drain<C, T: FnOnce()>(
        &self,
        start: impl FnOnce(&Self) -> C,
        done: impl FnOnce(C, u64) -> T,
    ) -> Duration {
        self.gate.send_replace(false);
        let before = self.opened.load(Ordering::SeqCst);
        let client = start(self);
        wait_until("the in-process watch", || {
            self.opened.load(Ordering::SeqCst) > before
        });
        let target = self.sim.step(EVENTS).unwrap();
        let ts = std::env::var_os("E2E_THREADSTATS").map(|_| thread_stats());
        let t0 = Instant::now();
        self.gate.send_replace(true);
        let teardown = done(client, target);
        let took = t0.elapsed();
        if let Some(ts) = ts {
            stats_add(&ts, &thread_stats(), took);
        }
        teardown();
        took
    }
}

/// Raw drain in process: the simulator's protobuf watch body, frames skipped by length.
fn inproc_raw_drain(p: &InProc, rt: &tokio::runtime::Runtime) -> Duration {
    p.drain(
        |p| {
            let lw = p.lister_watcher();
            let opts = WatchOptions {
                resource_version: p.sim.resource_version().to_string(),
                ..Default::default()
            };
            rt.block_on(lw.watch(&opts)).unwrap().body
        },
        |mut body, _| {
            rt.block_on(async {
                let mut frames = RawFrames::default();
                while frames.frames < EVENTS {
                    let chunk = body.next_chunk().await.unwrap().unwrap();
                    frames.frames_in(&chunk);
                }
            });
            move || drop(body)
        },
    )
}

/// Our informer in process: simulator → reflector → DeltaFIFO (or RealFIFO) → store →
/// `handlers` handlers (each records the newest resourceVersion it saw; the clock stops when
/// all saw the last).
fn inproc_informer_drain(
    p: &InProc,
    rt: &tokio::runtime::Runtime,
    handlers: usize,
    fifo: FifoKind,
) -> Duration {
    p.drain(
        |p| {
            let config = InformerConfig {
                fifo,
                ..Default::default()
            };
            let informer = Informer::new(p.lister_watcher(), config);
            let seen: Vec<Arc<Finish>> = (0..handlers)
                .map(|i| {
                    let last = Finish::new();
                    informer
                        .add_event_handler(
                            Seen {
                                finish: last.clone(),
                                typed: false,
                            },
                            HandlerOptions::new().name(format!("seen-{i}")),
                        )
                        .unwrap();
                    last
                })
                .collect();
            informer.start(rt.handle());
            (informer, seen)
        },
        |(informer, seen), target| {
            for l in &seen {
                l.wait("every handler", target);
            }
            move || informer.shutdown()
        },
    )
}

/// As the `informer` binary does (src/main.rs): no transparent huge pages for this process.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

fn e2e_inproc(c: &mut Criterion) {
    no_huge_pages();
    let dir = default_fixtures_dir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("client")
        .enable_all()
        .build()
        .unwrap();
    let sizes = [
        InProc::new(
            "etcd-pod-1.5KB",
            Templates::etcd_pod(&dir).unwrap(),
            Some(Env::etcd_pod()),
        ),
        InProc::new(
            "head-pod-13.6KB",
            Templates::head_pod(&dir).unwrap(),
            Some(Env::new()),
        ),
    ];
    for p in &sizes {
        let mut g = c.benchmark_group(format!("e2e-inproc/{}", p.name));
        g.throughput(Throughput::Elements(EVENTS));
        g.sample_size(10);
        g.bench_function("raw-drain", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| inproc_raw_drain(p, &rt)).sum())
        });
        stats_print(&format!("{} raw-drain", p.name));
        for handlers in [1, 4, 16] {
            g.bench_function(format!("informer-{handlers}-handlers"), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| inproc_informer_drain(p, &rt, handlers, FifoKind::DeltaFifo))
                        .sum()
                })
            });
            stats_print(&format!("{} informer-{handlers}-handlers", p.name));
        }
        // The same drain on a RealFIFO: what in-order delivery costs (BENCHMARKS.md, "RealFIFO").
        g.bench_function("informer-4-handlers-realfifo", |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| inproc_informer_drain(p, &rt, 4, FifoKind::RealFifo))
                    .sum()
            })
        });
        if let Some(env) = &p.http {
            g.bench_function("kube-runtime-json-loopback", |b| {
                b.iter_custom(|iters| (0..iters).map(|_| kube_runtime_drain(env)).sum())
            });
        }
        g.finish();
    }
    for p in sizes {
        if let Some(Env {
            server_rt,
            client_rt,
            handle,
            ..
        }) = p.http
        {
            server_rt.block_on(handle.shutdown());
            drop(client_rt);
        }
    }
}

fn e2e(c: &mut Criterion) {
    no_huge_pages();
    let env = Env::new();
    if std::env::var_os("E2E_SKIP_PROBE").is_none() {
        bytes_per_event(&env);
    }
    STATS.lock().unwrap().take();
    let mut g = c.benchmark_group("e2e-http");
    g.throughput(Throughput::Elements(EVENTS));
    g.sample_size(10);
    g.bench_function("a-raw-socket-drain", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| raw_drain(&env)).sum())
    });
    stats_print("a");
    g.bench_function("b-informer-protobuf-metadata", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| informer_drain(&env, true, false, false))
                .sum()
        })
    });
    stats_print("b");
    g.bench_function("b-informer-protobuf-metadata-reflector-thread", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| informer_drain(&env, true, false, true))
                .sum()
        })
    });
    stats_print("b'");
    g.bench_function("c-informer-protobuf-typed", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| informer_drain(&env, true, true, false))
                .sum()
        })
    });
    stats_print("c");
    g.bench_function("d-informer-json", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| informer_drain(&env, false, false, false))
                .sum()
        })
    });
    stats_print("d");
    g.bench_function("e-kube-runtime-json", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| kube_runtime_drain(&env)).sum())
    });
    stats_print("e");
    g.finish();
    let Env {
        server_rt,
        client_rt,
        handle,
        ..
    } = env;
    server_rt.block_on(handle.shutdown());
    drop(client_rt);
}

criterion_group!(benches, e2e, e2e_inproc);
criterion_main!(benches);

// ----- diagnostics: per-thread CPU of the timed region (`E2E_THREADSTATS=1`) ---------------

/// A numeric environment variable, if set and valid.
fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Per thread (name, tid): [CPU ns, run-queue wait ns, timeslices] from
/// `/proc/self/task/*/schedstat`, [voluntary, involuntary context switches] from its `status`,
/// [minor page faults] from its `stat`.
type ThreadStats = std::collections::HashMap<(String, u64), [u64; 6]>;

fn thread_stats() -> ThreadStats {
    // The kernel adds a running thread's current timeslice to its `schedstat` only when it
    // is switched out: without this yield the bench thread's work just before the timed
    // region (making the changes) would be counted in it.
    std::thread::yield_now();
    let mut out = std::collections::HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in dir.flatten() {
        let p = t.path();
        let tid: u64 = t.file_name().to_string_lossy().parse().unwrap_or(0);
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        let sched = std::fs::read_to_string(p.join("schedstat")).unwrap_or_default();
        let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
        let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
        let mut v = [0u64; 6];
        // `stat` after the `(comm)`: field 10, minflt, is the 8th.
        if let Some((_, rest)) = stat.rsplit_once(')') {
            v[5] = rest
                .split_whitespace()
                .nth(7)
                .and_then(|f| f.parse().ok())
                .unwrap_or(0);
        }
        for (i, f) in sched.split_whitespace().take(3).enumerate() {
            v[i] = f.parse().unwrap_or(0);
        }
        for l in status.lines() {
            if let Some(x) = l.strip_prefix("voluntary_ctxt_switches:") {
                v[3] = x.trim().parse().unwrap_or(0);
            }
            if let Some(x) = l.strip_prefix("nonvoluntary_ctxt_switches:") {
                v[4] = x.trim().parse().unwrap_or(0);
            }
        }
        out.insert((comm.trim().to_string(), tid), v);
    }
    out
}

/// Timed drains since the last print: their count, their wall time, and per thread name the
/// sums of the [`ThreadStats`] differences over their timed regions.
type StatsSum = (u64, Duration, std::collections::BTreeMap<String, [u64; 6]>);

static STATS: Mutex<Option<StatsSum>> = Mutex::new(None);

/// Adds one timed region (thread stats at its start and end) to [`STATS`].
fn stats_add(before: &ThreadStats, after: &ThreadStats, took: Duration) {
    let mut g = STATS.lock().unwrap();
    let (n, t, m) = g.get_or_insert_with(Default::default);
    *n += 1;
    *t += took;
    for (k, a) in after {
        let b = before.get(k).copied().unwrap_or([0; 6]);
        let e = m.entry(k.0.clone()).or_default();
        for (e, (a, b)) in e.iter_mut().zip(a.iter().zip(b)) {
            *e += a.saturating_sub(b);
        }
    }
}

/// Prints and resets [`STATS`]: per thread name, CPU and run-queue wait as % of the timed
/// wall time, timeslices, context switches and minor page faults per event.
fn stats_print(label: &str) {
    let Some((n, t, m)) = STATS.lock().unwrap().take() else {
        return;
    };
    let wall = t.as_nanos() as f64;
    eprintln!(
        "threadstats {label}: {n} drains, {:.1} ms wall each, {:.0} events/s",
        wall / n as f64 / 1e6,
        (n * EVENTS) as f64 / t.as_secs_f64()
    );
    let mut tot = 0.0;
    for (k, v) in &m {
        if v[0] == 0 && v[3] == 0 {
            continue;
        }
        tot += v[0] as f64;
        eprintln!(
            "  {k:>20}: cpu {:5.1} % of wall ({:.0} ns/event), runq-wait {:5.1} %, slices/event {:.3}, vol cs/event {:.3}, invol cs/event {:.3}, minflt/event {:.2}",
            v[0] as f64 / wall * 100.0,
            v[0] as f64 / (n * EVENTS) as f64,
            v[1] as f64 / wall * 100.0,
            v[2] as f64 / (n * EVENTS) as f64,
            v[3] as f64 / (n * EVENTS) as f64,
            v[4] as f64 / (n * EVENTS) as f64,
            v[5] as f64 / (n * EVENTS) as f64,
        );
    }
    eprintln!("  total cpu {:.2} cores", tot / wall);
}
