//! The simulated API server as the tests build it: templates, simulators, a loopback server.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::time::Duration;

use informer::object::{self, Object};
use informer::server::{ServerConfig, ServerHandle, serve};
use informer::sim::{FloodMix, SimConfig, SimServer, Templates, default_fixtures_dir};
use informer::{Informer, InformerConfig};

pub fn fixtures() -> PathBuf {
    default_fixtures_dir().unwrap()
}

/// Pod templates by name: `head` (the HEAD Pod, protobuf), `etcd` (a real etcd Pod,
/// protobuf), `both` (both of them), `json` (OpenShift Pods, JSON).
///
/// # Panics
/// On another name.
pub fn templates(name: &str) -> Templates {
    let dir = fixtures();
    match name {
        "head" => Templates::head_pod(&dir),
        "etcd" => Templates::etcd_pod(&dir),
        "both" => Templates::protobuf_pods(&dir),
        "json" => Templates::openshift_json(&dir),
        other => panic!("unknown templates {other}"),
    }
    .unwrap()
}

/// A simulator config over `templates(name)` holding about `objects`, whose floods create, update
/// and delete (10/70/20).
pub fn flood_config(name: &str, objects: usize, seed: u64) -> SimConfig {
    SimConfig::new(templates(name))
        .seed(seed)
        .initial_objects(objects)
        .mix(FloodMix {
            target_objects: objects,
            create: 10,
            update: 70,
            delete: 20,
        })
}

/// A simulator over `templates(name)` (seed 7) shaped by `f`.
pub fn sim(name: &str, f: impl FnOnce(SimConfig) -> SimConfig) -> SimServer {
    SimServer::new(f(SimConfig::new(templates(name)).seed(7))).unwrap()
}

/// A two-thread runtime with time and I/O, for tests that drive servers and clients from
/// plain `#[test]` code.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// An informer (default config) over `sim`, started on the current runtime and synced.
///
/// # Panics
/// When it has not synced within 30 s.
pub async fn synced_informer(sim: &SimServer) -> Informer<SimServer> {
    let informer = Informer::new(sim.clone(), InformerConfig::default());
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    informer
}

/// Every list request `sim` answered, in order: its page size limit, whether it continued a
/// list, and the answer's status code.
pub fn list_requests(sim: &SimServer) -> Vec<(Option<u32>, bool, i32)> {
    sim.requests()
        .iter()
        .filter_map(|q| {
            q.list()
                .map(|o| (o.limit, o.continue_token.is_some(), q.code()))
        })
        .collect()
}

/// The HEAD Pod's JSON twin (the same object as `core.v1.Pod.pb`).
pub fn head_pod_twin() -> Object {
    let bytes = std::fs::read(fixtures().join("k8s-testdata/HEAD/core.v1.Pod.json")).unwrap();
    object::decode(bytes.into()).unwrap()
}

/// Serves `sim` on 127.0.0.1:0 (with the HEAD Pod twin when its templates are protobuf).
pub async fn start(sim: &SimServer) -> ServerHandle {
    let mut config = ServerConfig::default();
    if sim.encoding() == object::Encoding::Protobuf {
        config = config.json_twins(vec![head_pod_twin()]);
    }
    serve(sim.clone(), config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Polls `f` every 20 ms until it returns true or `timeout` passes (real time: these tests
/// talk over sockets). Returns the last result.
pub async fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A JSON simulator of Deployments holding nothing yet, for writes from JSON clients.
pub fn json_deployments() -> SimServer {
    let template = serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "template", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "template"}},
            "template": {
                "metadata": {"labels": {"app": "template"}},
                "spec": {"containers": [{"name": "app", "image": "app:1"}]}
            }
        },
        "status": {}
    });
    let obj = object::decode(template.to_string().into()).unwrap();
    SimServer::new(SimConfig::new(Templates::from_objects(vec![obj]).unwrap()).seed(5)).unwrap()
}

/// `method path` with `body` and `headers` to the server at `url` (HTTP/1.0, one connection); the status code
/// and the body parsed as JSON (`Null` when it is not JSON).
pub async fn request(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await.unwrap();
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..at]).into_owned();
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (
        code,
        serde_json::from_slice(&raw[at + 4..]).unwrap_or(serde_json::Value::Null),
    )
}

/// A Pod object (protobuf, no body) with the given namespace, name, UID and labels: what store
/// tests index.
pub fn labeled_pod(
    ns: &str,
    name: &str,
    uid: &str,
    labels: &[(&str, &str)],
) -> std::sync::Arc<Object> {
    let meta = object::ObjectMeta::from(object::ObjectMetaFields {
        name: name.to_owned().into(),
        namespace: ns.to_owned().into(),
        uid: uid.to_owned().into(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Default::default()
    });
    std::sync::Arc::new(Object::from_parts(
        std::sync::Arc::new(object::GroupVersionKind::new("", "v1", "Pod")),
        meta,
        bytes::Bytes::new(),
        object::Encoding::Protobuf,
    ))
}
