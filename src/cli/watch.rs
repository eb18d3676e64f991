//! `informer watch`: an informer against a real cluster (or `informer serve`), with a live
//! summary and a final report on Ctrl-C.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use informer::client::{ClientOptions, HttpListerWatcher, discover};
use informer::distributor::{EventHandler, OverflowPolicy};
use informer::fifo::DeltaObject;
use informer::object::Object;
use informer::reflector::ReflectorConfig;
use informer::{HandlerOptions, Informer, InformerConfig};

use super::cache::{CacheReport, CompressionArg};

/// Arguments of `informer watch`.
#[derive(Debug, clap::Args)]
pub(crate) struct WatchArgs {
    /// Resource to watch, as kubectl names it: `pods`, `po`, `deployments.apps`,
    /// `deployments.v1.apps`, `widgets.example.com`.
    #[arg(long, default_value = "pods")]
    resource: String,
    /// Namespace (default: all namespaces).
    #[arg(long, short = 'n')]
    namespace: Option<String>,
    /// Label selector, e.g. `app=web,tier!=db`.
    #[arg(long, short = 'l')]
    selector: Option<String>,
    /// Field selector, e.g. `spec.nodeName=node-1`.
    #[arg(long)]
    field_selector: Option<String>,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// Kubeconfig context (default: the current one).
    #[arg(long)]
    context: Option<String>,
    /// API server URL (with a kubeconfig: replaces its server; alone: no credentials).
    #[arg(long)]
    server: Option<String>,
    /// Ask for JSON even for built-in kinds (default: protobuf first).
    #[arg(long)]
    json: bool,
    /// Seconds between summary lines.
    #[arg(long, default_value_t = 2.0, value_parser = super::duration::seconds)]
    interval: f64,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_parser = super::duration::seconds)]
    duration: Option<f64>,
    /// Namespaces shown per summary line (largest first).
    #[arg(long, default_value_t = 5)]
    top: usize,
    /// How the cache holds objects: as received, or zstd-compressed once idle.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    compression: CompressionArg,
    /// Print the final report as one JSON document (after the human lines).
    #[arg(long)]
    report_json: bool,
    /// Start with a streaming list (a watch with `sendInitialEvents=true`, client-go's
    /// WatchList) instead of paginated lists; servers without it make the informer fall back
    /// to lists.
    #[arg(long)]
    streaming_list: bool,
    /// Objects per list page (client-go's `WatchListPageSize`); 0 lists everything in one
    /// response, as an API server's watch cache answers a list at a resourceVersion.
    #[arg(long, default_value_t = 500)]
    page_size: u32,
    /// Run the reflector on a thread of its own (`InformerConfig::reflector_thread`) instead
    /// of on the command's tokio runtime.
    #[arg(long)]
    reflector_thread: bool,
}

/// `e` and every error under it, joined by `: ` (the server's message is at the bottom).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

/// Counts notifications and remembers when the last one came.
#[derive(Default)]
struct Counts {
    adds: AtomicU64,
    updates: AtomicU64,
    deletes: AtomicU64,
}

struct Counter(Arc<Counts>);

impl EventHandler for Counter {
    fn on_add(&mut self, _: &Arc<Object>, _: bool) {
        self.0.adds.fetch_add(1, Ordering::Relaxed);
    }
    fn on_update(&mut self, _: &Arc<Object>, _: &Arc<Object>) {
        self.0.updates.fetch_add(1, Ordering::Relaxed);
    }
    fn on_delete(&mut self, _: &DeltaObject) {
        self.0.deletes.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs the command; returns the process exit code.
pub(crate) fn run(args: &WatchArgs) -> i32 {
    super::block_on_command("watch", run_async(args))
}

async fn run_async(args: &WatchArgs) -> Result<(), String> {
    let options = ClientOptions {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        server: args.server.clone(),
    };
    let client = options.client().await.map_err(|e| e.to_string())?;
    let found = discover(&client, &args.resource)
        .await
        .map_err(|e| e.to_string())?;
    let mut resource = found.resource.clone();
    if let Some(ns) = args.namespace.as_deref().filter(|n| !n.is_empty()) {
        if !found.namespaced {
            return Err(format!(
                "{} is cluster-scoped: drop --namespace",
                resource.resource
            ));
        }
        resource = resource.in_namespace(ns);
    }
    if args.json {
        resource = resource.with_protobuf(false);
    }
    let path = resource.collection_path();
    let lw = HttpListerWatcher::new(client, resource);
    let informer = Informer::new(
        lw,
        InformerConfig {
            reflector: ReflectorConfig {
                label_selector: args.selector.clone(),
                field_selector: args.field_selector.clone(),
                ..Default::default()
            }
            .page_size(args.page_size)
            .use_watch_list(args.streaming_list),
            compression: args.compression.config(),
            reflector_thread: args.reflector_thread,
            ..Default::default()
        },
    );
    let counts = Arc::new(Counts::default());
    let registration = informer
        .add_event_handler(
            Counter(counts.clone()),
            HandlerOptions::new()
                .name("summary")
                .policy(OverflowPolicy::Unbounded),
        )
        .map_err(|e| e.to_string())?;
    // Every failure the informer recovers from, shown once per distinct message (a server
    // refusing the request shows why, instead of the summary just never syncing).
    let last_error: Arc<Mutex<Option<String>>> = Arc::default();
    let seen = last_error.clone();
    informer
        .set_watch_error_handler(move |e| {
            let msg = error_chain(e);
            let mut last = seen.lock().unwrap_or_else(PoisonError::into_inner);
            if last.as_deref() != Some(msg.as_str()) {
                eprintln!("error: {msg} (retrying)");
            }
            *last = Some(msg);
        })
        .map_err(|e| e.to_string())?;
    informer.start(&tokio::runtime::Handle::current());
    println!("watching {path} (kind {})", found.resource.kind);

    let started = Instant::now();
    let stop = super::until_stop(args.duration);
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(args.interval.max(0.1)));
    tick.tick().await;
    let mut last_events = 0u64;
    let mut last_at = Instant::now();
    loop {
        tokio::select! {
            () = &mut stop => break,
            _ = tick.tick() => {
                let s = Summary::take(&informer, &registration);
                let now = Instant::now();
                let rate = (s.events - last_events) as f64 / now.duration_since(last_at).as_secs_f64().max(1e-9);
                last_events = s.events;
                last_at = now;
                println!("{}", s.line(started, rate, args.top));
            }
        }
    }
    let s = Summary::take(&informer, &registration);
    let secs = started.elapsed().as_secs_f64();
    println!("final report after {secs:.1} s:");
    println!("  resource:          {path}");
    println!("  synced:            {}", informer.has_synced());
    println!("  resourceVersion:   {} (store)", s.store_rv);
    println!(
        "  objects:           {} in {} namespaces",
        s.objects,
        s.per_ns.len()
    );
    println!(
        "  watch events:      {} ({:.0}/s), {} bookmarks, {:.1} MB",
        s.events,
        s.events as f64 / secs.max(1e-9),
        s.bookmarks,
        s.watch_bytes as f64 / 1e6
    );
    println!(
        "  notifications:     {} adds, {} updates, {} deletes",
        counts.adds.load(Ordering::Relaxed),
        counts.updates.load(Ordering::Relaxed),
        counts.deletes.load(Ordering::Relaxed)
    );
    println!(
        "  list/watch:        {} lists ({} relists), {} watches, {} errors",
        s.lists, s.relists, s.watches, s.errors
    );
    let mut by_size: Vec<_> = s.per_ns.iter().collect();
    by_size.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (ns, n) in by_size.iter().take(args.top.max(1) * 4) {
        let ns = if ns.is_empty() {
            "(cluster)"
        } else {
            ns.as_str()
        };
        println!("  {ns:<30} {n}");
    }
    let last_error = last_error
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Some(e) = &last_error {
        println!("  last error:        {e}");
    }
    let cache = CacheReport::new(args.compression, &informer.cache_stats());
    println!("  cache:             {}", cache.line());
    if args.report_json {
        let report = serde_json::json!({
            "resource": path,
            "synced": informer.has_synced(),
            "resource_version": s.store_rv,
            "objects": s.objects,
            "namespaces": s.per_ns.len(),
            "seconds": secs,
            "watch_events": s.events,
            "bookmarks": s.bookmarks,
            "watch_bytes": s.watch_bytes,
            "adds": counts.adds.load(Ordering::Relaxed),
            "updates": counts.updates.load(Ordering::Relaxed),
            "deletes": counts.deletes.load(Ordering::Relaxed),
            "lists": s.lists,
            "relists": s.relists,
            "watches": s.watches,
            "errors": s.errors,
            "cache": cache,
            "last_error": last_error,
        });
        println!("{report}");
    }
    let synced = informer.has_synced();
    informer.shutdown();
    match (synced, last_error) {
        (false, Some(e)) => Err(format!("never synced; last error: {e}")),
        _ => Ok(()),
    }
}

/// One reading of the informer's state.
struct Summary {
    objects: usize,
    per_ns: BTreeMap<String, usize>,
    store_rv: u64,
    stream_rv: u64,
    events: u64,
    bookmarks: u64,
    watch_bytes: u64,
    lists: u64,
    relists: u64,
    watches: u64,
    errors: u64,
    pending: u64,
}

impl Summary {
    fn take<L: informer::reflector::ListerWatcher>(
        informer: &Informer<L>,
        registration: &informer::Registration,
    ) -> Self {
        let snap = informer.store().snapshot();
        let mut per_ns = BTreeMap::new();
        for (_, o) in snap.iter() {
            *per_ns.entry(o.namespace().to_owned()).or_insert(0) += 1;
        }
        let m = informer.reflector_metrics();
        let g = |f: fn(&informer::reflector::ReflectorMetrics) -> &AtomicU64| {
            m.as_ref().map_or(0, |m| f(m).load(Ordering::Relaxed))
        };
        Summary {
            objects: snap.len(),
            per_ns,
            store_rv: snap.resource_version(),
            stream_rv: g(|m| &m.last_resource_version),
            events: g(|m| &m.events),
            bookmarks: g(|m| &m.bookmarks),
            watch_bytes: g(|m| &m.watch_bytes),
            lists: g(|m| &m.lists),
            relists: g(|m| &m.relists),
            watches: g(|m| &m.watches),
            errors: g(|m| &m.errors),
            pending: registration.listener().stats().pending,
        }
    }

    fn line(&self, started: Instant, rate: f64, top: usize) -> String {
        let mut by_size: Vec<_> = self.per_ns.iter().collect();
        by_size.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let tops: Vec<String> = by_size
            .iter()
            .take(top)
            .map(|(ns, n)| format!("{}={n}", if ns.is_empty() { "(cluster)" } else { ns }))
            .collect();
        format!(
            "[{:>7.1}s] rv {}  objects {} in {} ns  events {:.0}/s  lag {} rv, {} pending  lists {} watches {} errors {}  {}",
            started.elapsed().as_secs_f64(),
            self.store_rv,
            self.objects,
            self.per_ns.len(),
            rate,
            self.stream_rv.saturating_sub(self.store_rv),
            self.pending,
            self.lists,
            self.watches,
            self.errors,
            tops.join(" ")
        )
    }
}
