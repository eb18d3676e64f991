//! Shared by the HTTP tests: a simulated API server on a loopback port, the HEAD Pod templates
//! with their JSON twin, and a comparison of a client's cache with the server's truth.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use informer::object::{self, Object, ObjectKey};
use informer::server::{ServerConfig, ServerHandle, serve};
use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};

pub(crate) fn fixtures() -> PathBuf {
    default_fixtures_dir().unwrap()
}

/// The HEAD Pod's JSON twin (the same object as `core.v1.Pod.pb`).
pub(crate) fn head_pod_twin() -> Object {
    let bytes = std::fs::read(fixtures().join("k8s-testdata/HEAD/core.v1.Pod.json")).unwrap();
    object::decode(bytes.into()).unwrap()
}

/// A simulator over `templates` ("head" protobuf or "openshift" JSON) shaped by `f`.
pub(crate) fn sim(templates: &str, f: impl FnOnce(SimConfig) -> SimConfig) -> SimServer {
    let t = match templates {
        "head" => Templates::head_pod(&fixtures()).unwrap(),
        "openshift" => Templates::openshift_json(&fixtures()).unwrap(),
        other => panic!("unknown templates {other}"),
    };
    SimServer::new(f(SimConfig::new(t).seed(7))).unwrap()
}

/// Serves `sim` on 127.0.0.1:0 (with the HEAD Pod twin when its templates are protobuf).
pub(crate) async fn start(sim: &SimServer) -> ServerHandle {
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
pub(crate) async fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
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

pub(crate) type Versions = BTreeMap<ObjectKey, (String, String)>;
