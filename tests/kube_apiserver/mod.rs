//! A real kube-apiserver with etcd for the tests, and helpers that write through its API.

#![allow(dead_code, unreachable_pub)]

pub mod fixtures;
pub mod gate;
pub mod workloads;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use informer::client::ClientOptions;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

/// `interop/bin/apiserver` (built from the `k8s.io/kubernetes` module when missing or stale),
/// or `$INFORMER_APISERVER`. A missing Go toolchain or a failed build fails the test: it is
/// never a skip.
pub fn binary() -> PathBuf {
    match std::env::var_os("INFORMER_APISERVER") {
        Some(p) => PathBuf::from(p),
        None => crate::interop::binary("apiserver"),
    }
}

/// A running etcd + kube-apiserver. Stopped with SIGTERM on drop; a server held in a `static`
/// stops when the test process exits (its stdin pipe closes: `--stop-on-stdin-eof`).
pub struct KubeApiServer {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// A kubeconfig with a client certificate in `system:masters`.
    pub kubeconfig: PathBuf,
    /// etcd's client URL (`http://127.0.0.1:PORT`).
    pub etcd: String,
    /// The server's log (its stderr), under the target directory.
    pub log: PathBuf,
    child: Mutex<Child>,
    _stdin: ChildStdin,
}

impl KubeApiServer {
    /// Starts a server with the extra `flags` of `interop/apiserver` (e.g.
    /// `--watch-cache=false`, `--feature-gates=WatchList=false`) and waits until it is ready.
    ///
    /// # Panics
    /// When the binary cannot be built or run, or the server is not ready within 3 minutes
    /// (the panic message holds the end of its log).
    pub fn start(flags: &[&str]) -> KubeApiServer {
        static N: AtomicU32 = AtomicU32::new(0);
        let bin = binary();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        remove_stale_logs(dir);
        let log = dir.join(format!(
            "informer-apiserver-{}-{}.log",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let stderr = std::fs::File::create(&log).unwrap();
        let mut child = Command::new(bin)
            .arg("--stop-on-stdin-eof")
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("starting the apiserver: {e}"));
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = stdout.read_line(&mut line);
            let _ = tx.send(line);
            // Keep draining (nothing more is printed, but never block the child on a pipe).
            let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        });
        let line = match rx.recv_timeout(Duration::from_secs(180)) {
            Ok(l) if !l.trim().is_empty() => l,
            other => {
                let _ = child.kill();
                panic!(
                    "kube-apiserver {flags:?} did not become ready ({other:?}); end of its log {}:\n{}",
                    log.display(),
                    tail(&log, 40)
                );
            }
        };
        let ready: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("ready line {line:?}: {e}"));
        let s = |k: &str| ready[k].as_str().unwrap().to_owned();
        KubeApiServer {
            url: s("url"),
            kubeconfig: PathBuf::from(s("kubeconfig")),
            etcd: s("etcd"),
            log,
            child: Mutex::new(child),
            _stdin: stdin,
        }
    }

    /// The server with default flags (watch cache on, WatchList on), shared by every test of
    /// this process; tests keep apart by namespace.
    pub fn shared() -> &'static KubeApiServer {
        static SHARED: OnceLock<KubeApiServer> = OnceLock::new();
        SHARED.get_or_init(|| KubeApiServer::start(&[]))
    }

    /// Client options naming this server's kubeconfig (x509 client certificate).
    pub fn options(&self) -> ClientOptions {
        ClientOptions {
            kubeconfig: Some(self.kubeconfig.clone()),
            ..ClientOptions::default()
        }
    }

    /// A `kube::Client` from the kubeconfig (our `ClientOptions`, so the retry layer is off as
    /// the informer has it).
    pub async fn client(&self) -> kube::Client {
        self.options().client().await.unwrap()
    }

    /// Compacts etcd's history up to `revision` through etcd's JSON gateway
    /// (`POST /v3/kv/compaction`): a watch or a continue token from an older resourceVersion
    /// then gets 410 Gone from the apiserver when it reads etcd (watch cache off).
    pub fn compact(&self, revision: u64) {
        let body = format!(r#"{{"revision":"{revision}","physical":true}}"#);
        let reply = http_post(&self.etcd, "/v3/kv/compaction", &body);
        assert!(
            reply.starts_with("HTTP/1.1 200"),
            "etcd compaction to {revision}: {reply}"
        );
    }

    /// etcd's current revision (`POST /v3/kv/range` on an empty key reads the header only).
    pub fn etcd_revision(&self) -> u64 {
        let reply = http_post(
            &self.etcd,
            "/v3/kv/range",
            r#"{"key":"AA==","count_only":true}"#,
        );
        let body = reply.split("\r\n\r\n").nth(1).unwrap_or("");
        let v: serde_json::Value = serde_json::from_str(body.trim())
            .unwrap_or_else(|e| panic!("etcd range reply {reply:?}: {e}"));
        v["header"]["revision"].as_str().unwrap().parse().unwrap()
    }
}

impl Drop for KubeApiServer {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap();
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        for _ in 0..300 {
            if let Ok(Some(_)) = child.try_wait() {
                let _ = std::fs::remove_file(&self.log);
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Removes the logs of servers whose test process has ended (a server held in a `static` is
/// never dropped, so its log stays behind).
fn remove_stale_logs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix("informer-apiserver-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid
            && pid != std::process::id()
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A one-shot HTTP/1.1 POST of a JSON body to `base` (`http://host:port`); the whole reply.
fn http_post(base: &str, path: &str, body: &str) -> String {
    let host = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
}

/// Creates a namespace named `<prefix>-<n>` (unique in this process) and returns its name.
pub async fn namespace(client: &kube::Client, prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "{prefix}-{}-{}",
        std::process::id() % 100_000,
        N.fetch_add(1, Ordering::Relaxed)
    );
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    name
}

/// Runs `f` on every item, `concurrency` requests at a time; panics on the first error.
pub async fn each<T, F, Fut, R>(items: Vec<T>, concurrency: usize, f: F) -> Vec<R>
where
    T: Send + 'static,
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = Result<R, kube::Error>> + Send + 'static,
    R: Send + 'static,
{
    let mut out = Vec::with_capacity(items.len());
    let mut set = tokio::task::JoinSet::<Result<R, kube::Error>>::new();
    for item in items {
        if set.len() >= concurrency {
            out.push(set.join_next().await.unwrap().unwrap().unwrap());
        }
        set.spawn(f(item));
    }
    while let Some(r) = set.join_next().await {
        out.push(r.unwrap().unwrap());
    }
    out
}

/// What [`replace_each`] and [`delete_each`] write: any typed or dynamic resource.
pub trait Written:
    kube::Resource
    + Clone
    + serde::Serialize
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Written for K where
    K: kube::Resource
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// Applies `change` to each object and writes it back (PUT, optimistic concurrency on the
/// object's resourceVersion), `CONCURRENCY` at a time; the objects as the server answered.
pub async fn replace_each<K, F>(api: &Api<K>, objects: Vec<K>, change: F) -> Vec<K>
where
    K: Written,
    F: Fn(&mut K) + Clone + Send + Sync + 'static,
{
    let api = api.clone();
    each(objects, CONCURRENCY, move |mut o: K| {
        let (api, change) = (api.clone(), change.clone());
        async move {
            change(&mut o);
            let name = o.meta().name.clone().unwrap();
            api.replace(&name, &PostParams::default(), &o).await
        }
    })
    .await
}

/// Deletes the objects named, `CONCURRENCY` at a time.
pub async fn delete_each<K>(api: &Api<K>, names: Vec<String>)
where
    K: Written,
{
    let api = api.clone();
    each(names, CONCURRENCY, move |name: String| {
        let api = api.clone();
        async move { api.delete(&name, &DeleteParams::default()).await.map(drop) }
    })
    .await;
}

/// Requests in flight at once while writing objects.
pub const CONCURRENCY: usize = 24;
