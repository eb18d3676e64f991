//! Heap allocations per decoded object, counted with dhat's heap-usage testing (one test in
//! this binary: dhat allows one profiler per process). Decoded metadata strings are copied once
//! into one packed text buffer per object (the key is its start), so decoding a real Pod costs a
//! handful of allocations (the `Object`, that text and the table of where each string ends, the
//! managed-fields handles), not one per string. Run with `--nocapture` to see the figures.

use std::path::Path;

use bytes::Bytes;
use informer::object::ObjectMeta;
use informer::object::{self, DEFAULT_FRAME_LIMIT, Object, WatchDecoder, WatchEvent, WatchFormat};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn fixture(p: &str) -> Bytes {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures")
        .join(p);
    Bytes::from(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// `(allocations, frees)` per object while `decode` builds `n` objects, asks each for its key
/// three times (the DeltaFIFO, the store and a listener each do) and drops them.
fn count(n: usize, mut decode: impl FnMut(usize) -> Object) -> (f64, f64) {
    let mut keep = Vec::with_capacity(n);
    let start = dhat::HeapStats::get();
    for i in 0..n {
        let o = decode(i);
        for _ in 0..3 {
            std::hint::black_box(o.key());
        }
        keep.push(o);
    }
    let built = dhat::HeapStats::get();
    keep.clear();
    let dropped = dhat::HeapStats::get();
    let allocs = (built.total_blocks - start.total_blocks) as f64 / n as f64;
    let frees = (built.curr_blocks - dropped.curr_blocks) as f64 / n as f64;
    (allocs, frees)
}

#[test]
fn allocations_per_decoded_object() {
    let pb = fixture("k8s-testdata/HEAD/core.v1.Pod.pb");
    let json = fixture(
        "real/openshift-insights-real-objects/pods/openshift-monitoring_prometheus-k8s-0.json",
    );
    let pod = object::decode(pb.clone()).unwrap();
    const N: usize = 200;
    let mut stream = Vec::new();
    for i in 0..N {
        let mut m = pod.meta().to_fields();
        m.name = format!("pod-{i}").into();
        m.resource_version = (i + 1).to_string().into();
        // Live Pods, as a watch mostly brings: the fixture's deletion fields cleared.
        m.deletion_timestamp = None;
        m.deletion_grace_period_seconds = None;
        object::encode_watch_frame(
            &WatchEvent::Modified(pod.with_meta(ObjectMeta::from(m)).unwrap()),
            &mut stream,
        )
        .unwrap();
    }
    // One frame per buffer, as a real API server flushes them: each event's bytes are their own.
    let mut frames = Vec::with_capacity(N);
    let mut at = 0;
    while at < stream.len() {
        let len = u32::from_be_bytes(stream[at..at + 4].try_into().unwrap()) as usize;
        frames.push(Bytes::copy_from_slice(&stream[at..at + 4 + len]));
        at += 4 + len;
    }
    let mut events = Vec::with_capacity(N);
    let mut decoder = WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT);

    let _profiler = dhat::Profiler::builder().testing().build();

    let (pb_allocs, pb_frees) = count(N, |_| object::decode(pb.clone()).unwrap());
    let (json_allocs, json_frees) = count(N, |_| object::decode(json.clone()).unwrap());
    // The watch decoder's own per-event costs (event vector growth aside) included.
    let mut frames = frames.into_iter();
    let (watch_allocs, watch_frees) = count(N, |_| {
        decoder.push(frames.next().unwrap());
        let ev = decoder.next_event().unwrap().unwrap();
        events.push(());
        match ev {
            WatchEvent::Modified(o) => o,
            other => panic!("unexpected event {other:?}"),
        }
    });
    assert_eq!(events.len(), N);

    let m = pod.meta();
    eprintln!(
        "HEAD Pod ({} labels, {} annotations, {} owner references, {} finalizers, {} managed \
         fields): allocations / frees per object: protobuf envelope {pb_allocs:.2} / \
         {pb_frees:.2}, protobuf watch frame {watch_allocs:.2} / {watch_frees:.2}; OpenShift \
         Pod JSON {json_allocs:.2} / {json_frees:.2}",
        m.labels().len(),
        m.annotations().len(),
        m.owner_references().len(),
        m.finalizers().len(),
        m.managed_fields().len(),
    );
    // Protobuf: the metadata's text (which the cache key shares) and string ends, its
    // managed-fields handles and the object, and for a lone envelope its group/version/kind
    // (two strings and their `Arc`); the watch decoder shares one GVK. One more for an object
    // being deleted (its deletion timestamp and grace period are boxed): the fixture the
    // envelopes decode sets them, the watch frames' live Pods do not. With a key of its own:
    // 7 and 5; before packed metadata (a reference-counted slice per string, a vector per
    // repeated field): 9 and 7; before string slices (owned `String`s, `BTreeMap`s, a key
    // built per call): 28 and 26.
    let deleting = f64::from(u8::from(
        m.deletion_timestamp().is_some() || m.deletion_grace_period_seconds().is_some(),
    ));
    assert_eq!(deleting, 1.0, "the HEAD fixture sets the deletion fields");
    assert!(
        pb_allocs <= 6.0 + deleting,
        "protobuf envelope: {pb_allocs} allocations per object"
    );
    assert!(
        watch_allocs <= 4.1,
        "watch frame: {watch_allocs} allocations per object"
    );
    // Everything allocated for an object is freed with it (the watch decoder's own buffers,
    // a few allocations over the whole stream, stay with the decoder).
    assert!(pb_frees >= pb_allocs - 0.01, "{pb_frees} < {pb_allocs}");
    assert!(
        watch_frees >= watch_allocs - 0.1,
        "{watch_frees} < {watch_allocs}"
    );
    // JSON: the metadata vectors, the GVK, and serde's temporaries (the entry lists read before
    // they are sorted, owner references); those are freed during the decode.
    assert!(
        json_allocs <= 20.0,
        "JSON: {json_allocs} allocations per object"
    );
}
