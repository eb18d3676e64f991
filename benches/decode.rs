//! Decode throughput: our metadata-first decode against a full typed decode of the same bytes
//! (k8s-pb / prost: what a client that decodes every object does) and against serde_json for
//! the JSON path, in the same run. Inputs are the real fixtures in `../shared/fixtures`.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use std::path::Path;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use informer::object::ObjectMeta;
use informer::object::{self, DEFAULT_FRAME_LIMIT, WatchDecoder, WatchEvent, WatchFormat};
use prost::Message;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn fixture(p: &str) -> Bytes {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures")
        .join(p);
    Bytes::from(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

fn protobuf(c: &mut Criterion) {
    for (name, input) in [
        ("head-pod", fixture("k8s-testdata/HEAD/core.v1.Pod.pb")),
        ("etcd-pod", {
            let b = fixture("real/auger-etcd-real-protobuf/storage__pod.bin");
            b.slice(..b.len() - 1)
        }),
    ] {
        let mut g = c.benchmark_group(format!("decode-protobuf/{name}"));
        g.throughput(Throughput::Bytes(input.len() as u64));
        g.bench_function("informer metadata-first", |b| {
            b.iter(|| object::decode(input.clone()).unwrap())
        });
        let raw = object::decode_envelope(&input).unwrap().raw;
        g.bench_function("k8s-pb full Pod decode", |b| {
            b.iter(|| k8s_pb::api::core::v1::Pod::decode(raw.clone()).unwrap())
        });
        g.finish();
    }
}

fn json(c: &mut Criterion) {
    let input = fixture(
        "real/openshift-insights-real-objects/pods/openshift-monitoring_prometheus-k8s-0.json",
    );
    let mut g = c.benchmark_group("decode-json/openshift-pod");
    g.throughput(Throughput::Bytes(input.len() as u64));
    g.bench_function("informer metadata-first", |b| {
        b.iter(|| object::decode(input.clone()).unwrap())
    });
    g.bench_function("serde_json Value", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(&input).unwrap())
    });
    g.finish();
}

fn watch_stream(c: &mut Criterion) {
    let pod = object::decode(fixture("k8s-testdata/HEAD/core.v1.Pod.pb")).unwrap();
    let mut stream = Vec::new();
    for i in 0..1000 {
        let mut m = pod.meta().to_fields();
        m.name = format!("pod-{i}").into();
        m.resource_version = (i + 1).to_string().into();
        object::encode_watch_frame(
            &WatchEvent::Modified(pod.with_meta(ObjectMeta::from(m)).unwrap()),
            &mut stream,
        )
        .unwrap();
    }
    let stream = Bytes::from(stream);
    let mut g = c.benchmark_group("watch-stream/1000-head-pods");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("informer WatchDecoder, 64 KiB chunks", |b| {
        b.iter(|| {
            let mut d = WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT);
            let mut n = 0;
            for chunk in stream.chunks(64 * 1024) {
                d.push(stream.slice_ref(chunk));
                while let Some(_e) = d.next_event().unwrap() {
                    n += 1;
                }
            }
            assert_eq!(n, 1000);
        })
    });
    g.bench_function("prost WatchEvent + k8s-pb Pod per frame", |b| {
        b.iter(|| {
            let mut at = 0;
            let mut n = 0;
            while at < stream.len() {
                let len = u32::from_be_bytes(stream[at..at + 4].try_into().unwrap()) as usize;
                let ev =
                    informer::wire::meta::WatchEvent::decode(stream.slice(at + 4..at + 4 + len))
                        .unwrap();
                let env = object::decode_envelope(&ev.object.unwrap().raw.unwrap()).unwrap();
                let _pod = k8s_pb::api::core::v1::Pod::decode(env.raw).unwrap();
                at += 4 + len;
                n += 1;
            }
            assert_eq!(n, 1000);
        })
    });
    g.finish();
}

/// What a kube-rs user pays for typed objects on each path, for the same HEAD Pod in both
/// encodings: the informer's per-event decode (metadata first) and a typed read (prost into
/// k8s-pb, serde into k8s-openapi). Behind `KubeInformer`'s choice of JSON (src/api.rs).
fn typed_read(c: &mut Criterion) {
    use k8s_openapi::api::core::v1::Pod as OpenApiPod;
    let pb = fixture("k8s-testdata/HEAD/core.v1.Pod.pb");
    let json = fixture("k8s-testdata/HEAD/core.v1.Pod.json");
    let mut g = c.benchmark_group("typed-read/head-pod");
    g.bench_function("protobuf: informer metadata-first", |b| {
        b.iter(|| object::decode(pb.clone()).unwrap())
    });
    g.bench_function("json: informer metadata-first", |b| {
        b.iter(|| object::decode(json.clone()).unwrap())
    });
    let pb_obj = object::decode(pb.clone()).unwrap();
    g.bench_function("protobuf: k8s-pb Pod (prost)", |b| {
        b.iter(|| pb_obj.decode::<k8s_pb::api::core::v1::Pod>().unwrap())
    });
    let json_obj = object::decode(json.clone()).unwrap();
    g.bench_function("json: k8s-openapi Pod (serde)", |b| {
        b.iter(|| json_obj.deserialize::<OpenApiPod>().unwrap())
    });
    g.finish();

    let big = fixture(
        "real/openshift-insights-real-objects/pods/openshift-monitoring_prometheus-k8s-0.json",
    );
    let big_obj = object::decode(big).unwrap();
    let mut g = c.benchmark_group("typed-read/openshift-pod");
    g.bench_function("json: k8s-openapi Pod (serde)", |b| {
        b.iter(|| big_obj.deserialize::<OpenApiPod>().unwrap())
    });
    g.finish();
}

criterion_group!(benches, protobuf, json, watch_stream, typed_read);
criterion_main!(benches);
