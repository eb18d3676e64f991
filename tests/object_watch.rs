//! Encoders and incremental decoders round-trip: watch streams cut at every chunk boundary,
//! lists of both encodings, bookmarks, errors and metadata re-encoding.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use informer::object::ObjectMeta;
use informer::object::{
    self, ApiStatus, DEFAULT_FRAME_LIMIT, Encoding, GroupVersionKind, Object, SHARED_BUFFER_SPAN,
    WatchDecoder, WatchEvent, WatchFormat, decode_list, encode_list_json, encode_list_protobuf,
    encode_watch_frame, encode_watch_line,
};
use proptest::prelude::*;

fn fixture(p: &str) -> Bytes {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures")
        .join(p);
    Bytes::from(std::fs::read(p).unwrap())
}

fn pods(n: usize) -> Vec<Object> {
    let base = object::decode(fixture("k8s-testdata/HEAD/core.v1.Pod.pb")).unwrap();
    (0..n)
        .map(|i| {
            let mut m = base.meta().to_fields();
            m.name = format!("pod-{i}").into();
            m.namespace = format!("ns-{}", i % 3).into();
            m.uid = format!("uid-{i}").into();
            m.resource_version = (100 + i).to_string().into();
            m.labels.insert("app".into(), format!("a{}", i % 2).into());
            base.with_meta(ObjectMeta::from(m)).unwrap()
        })
        .collect()
}

fn json_pods(n: usize) -> Vec<Object> {
    let base = object::decode(fixture(
        "real/openshift-insights-real-objects/pods/openshift-monitoring_alertmanager-main-0.json",
    ))
    .unwrap();
    (0..n)
        .map(|i| {
            let mut m = base.meta().to_fields();
            m.name = format!("am-{i}").into();
            m.resource_version = (7 + i).to_string().into();
            base.with_meta(ObjectMeta::from(m)).unwrap()
        })
        .collect()
}

fn events(objs: &[Object]) -> Vec<WatchEvent> {
    let gvk = objs[0].gvk_arc().clone();
    let mut v = Vec::new();
    for (i, o) in objs.iter().enumerate() {
        v.push(match i % 3 {
            0 => WatchEvent::Added(o.clone()),
            1 => WatchEvent::Modified(o.clone()),
            _ => WatchEvent::Deleted(o.clone()),
        });
    }
    v.push(WatchEvent::bookmark(gvk, "999", true, objs[0].encoding()));
    v.push(WatchEvent::Error(ApiStatus {
        code: 410,
        status: "Failure".into(),
        reason: "Expired".into(),
        message: "too old resource version: 1 (5)".into(),
        cause_reasons: vec![],
        retry_after_seconds: None,
    }));
    v
}

fn encode(events: &[WatchEvent], format: WatchFormat) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        match format {
            WatchFormat::Protobuf => encode_watch_frame(e, &mut out).unwrap(),
            WatchFormat::Json => encode_watch_line(e, &mut out).unwrap(),
        }
    }
    out
}

fn decode_chunked(stream: &[u8], cuts: &[usize], format: WatchFormat) -> Vec<WatchEvent> {
    let mut d = WatchDecoder::new(format, DEFAULT_FRAME_LIMIT);
    let mut out = Vec::new();
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.push(stream.len());
    for c in cuts {
        // Unique chunks, as an HTTP client that hands over its buffers would push them, so
        // that large frames take the zero-copy path.
        d.push(Bytes::copy_from_slice(&stream[at..c.max(at)]));
        at = c.max(at);
        while let Some(e) = d.next_event().unwrap() {
            out.push(e);
        }
    }
    if let Some(e) = d.finish().unwrap() {
        out.push(e);
    }
    out
}

/// Objects compare by metadata, kind and bytes; a JSON object re-encoded compact differs only
/// in whitespace, so compare JSON raw bytes as parsed values.
fn same(a: &WatchEvent, b: &WatchEvent) -> bool {
    match (a.object(), b.object()) {
        (Some(x), Some(y)) => {
            a.event_type() == b.event_type()
                && x.meta() == y.meta()
                && x.gvk() == y.gvk()
                && match x.encoding() {
                    Encoding::Protobuf => x.raw().unwrap() == y.raw().unwrap(),
                    Encoding::Json => x.to_json_value().unwrap() == y.to_json_value().unwrap(),
                }
        }
        _ => a == b,
    }
}

#[test]
fn protobuf_stream_survives_every_single_cut() {
    let evs = events(&pods(4));
    let stream = encode(&evs, WatchFormat::Protobuf);
    for cut in 0..=stream.len() {
        let got = decode_chunked(&stream, &[cut], WatchFormat::Protobuf);
        assert_eq!(got.len(), evs.len(), "cut at {cut}");
        assert!(
            got.iter().zip(&evs).all(|(a, b)| same(a, b)),
            "cut at {cut}"
        );
    }
}

#[test]
fn json_stream_survives_every_single_cut() {
    let evs = events(&json_pods(3));
    let stream = encode(&evs, WatchFormat::Json);
    assert_eq!(
        stream.iter().filter(|&&b| b == b'\n').count(),
        evs.len(),
        "one line per event"
    );
    for cut in (0..=stream.len()).step_by(stream.len() / 150 + 1) {
        let got = decode_chunked(&stream, &[cut], WatchFormat::Json);
        assert_eq!(got.len(), evs.len(), "cut at {cut}");
        assert!(
            got.iter().zip(&evs).all(|(a, b)| same(a, b)),
            "cut at {cut}"
        );
    }
}

/// Events, their framing and their encoded stream.
type Stream = (Vec<WatchEvent>, WatchFormat, Vec<u8>);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn streams_survive_random_chunking(cuts in proptest::collection::vec(any::<usize>(), 0..40)) {
        static STREAMS: std::sync::LazyLock<Vec<Stream>> =
            std::sync::LazyLock::new(|| {
                [(events(&pods(5)), WatchFormat::Protobuf), (events(&json_pods(2)), WatchFormat::Json)]
                    .into_iter()
                    .map(|(e, f)| { let s = encode(&e, f); (e, f, s) })
                    .collect()
            });
        for (evs, format, stream) in STREAMS.iter() {
            let (format, stream) = (*format, stream.as_slice());
            let got = decode_chunked(stream, &cuts, format);
            prop_assert_eq!(got.len(), evs.len());
            prop_assert!(got.iter().zip(evs).all(|(a, b)| same(a, b)));
        }
    }
}

/// Whether each decoded object's bytes point into `stream` (zero-copy) or elsewhere (copied),
/// `stream` pushed as one chunk that is the only reference to its buffer.
fn sliced(stream: &Bytes, decoder: WatchDecoder) -> Vec<(String, bool)> {
    let chunk = Bytes::copy_from_slice(stream);
    let range = chunk.as_ptr() as usize..chunk.as_ptr() as usize + chunk.len();
    sliced_from(chunk, range, decoder)
}

/// As [`sliced`], for a `chunk` that may share its buffer; `range` is that buffer's.
fn sliced_from(
    chunk: Bytes,
    range: std::ops::Range<usize>,
    decoder: WatchDecoder,
) -> Vec<(String, bool)> {
    let mut d = decoder;
    d.push(chunk);
    let mut out = Vec::new();
    while let Some(e) = d.next_event().unwrap() {
        if let Some(o) = e.object() {
            out.push((
                o.gvk().kind.clone(),
                range.contains(&(o.raw().unwrap().as_ptr() as usize)),
            ));
        }
    }
    out
}

#[test]
fn large_frames_are_zero_copy_and_small_ones_compacted() {
    let evs = events(&pods(3));
    let stream = Bytes::from(encode(&evs, WatchFormat::Protobuf));
    // Pods (13.5 KB each) are more than a quarter of the 41 KB chunk: sliced. The bookmark
    // (a few dozen bytes) is copied so it does not keep the chunk alive.
    let got = sliced(
        &stream,
        WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT),
    );
    assert_eq!(
        got,
        [
            ("Pod".to_owned(), true),
            ("Pod".to_owned(), true),
            ("Pod".to_owned(), true),
            ("Pod".to_owned(), false)
        ]
    );
    // Compaction off: everything is a slice of the chunk.
    let got = sliced(
        &stream,
        WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT).with_compaction(0),
    );
    assert!(got.iter().all(|(_, s)| *s), "{got:?}");
    // Ratio 1: anything smaller than its whole chunk is copied.
    let got = sliced(
        &stream,
        WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT).with_compaction(1),
    );
    assert!(got.iter().all(|(_, s)| !*s), "{got:?}");
}

/// An HTTP body's chunks are slices of the client's read buffer, which the client keeps using
/// (kube-apiserver sends one event per chunk): such a chunk counts as `SHARED_BUFFER_SPAN`
/// bytes, so the same Pods that a chunk of their own leaves sliced (above) are copied out.
#[test]
fn chunks_that_share_their_buffer_count_as_a_whole_read_buffer() {
    let evs = events(&pods(3));
    let stream = encode(&evs, WatchFormat::Protobuf);
    // A read buffer holding the stream and more; the decoder gets a slice of it.
    let mut read_buf = bytes::BytesMut::with_capacity(SHARED_BUFFER_SPAN);
    read_buf.extend_from_slice(&stream);
    read_buf.extend_from_slice(&[0; 1024]);
    let range = read_buf.as_ptr() as usize..read_buf.as_ptr() as usize + read_buf.capacity();
    let chunk = read_buf.split_to(stream.len()).freeze();
    assert!(!chunk.is_unique());
    let got = sliced_from(
        chunk,
        range,
        WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT),
    );
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|(_, s)| !*s), "{got:?}");
    // Compaction off still slices.
    let mut read_buf = bytes::BytesMut::with_capacity(SHARED_BUFFER_SPAN);
    read_buf.extend_from_slice(&stream);
    let range = read_buf.as_ptr() as usize..read_buf.as_ptr() as usize + read_buf.capacity();
    let chunk = read_buf.split_to(stream.len()).freeze();
    let got = sliced_from(
        chunk,
        range,
        WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT).with_compaction(0),
    );
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|(_, s)| *s), "{got:?}");
}

#[test]
fn bookmark_and_error_events_decode() {
    for (objs, format) in [
        (pods(1), WatchFormat::Protobuf),
        (json_pods(1), WatchFormat::Json),
    ] {
        let evs = events(&objs);
        let got = decode_chunked(&encode(&evs, format), &[], format);
        let WatchEvent::Bookmark(b) = &got[got.len() - 2] else {
            panic!("{format:?}: no bookmark")
        };
        assert_eq!(b.resource_version(), "999");
        assert_eq!(
            b.meta().annotations().get("k8s.io/initial-events-end"),
            Some("true")
        );
        let WatchEvent::Error(s) = &got[got.len() - 1] else {
            panic!("{format:?}: no error")
        };
        assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    }
}

#[test]
fn upstream_watch_event_fixture_decodes() {
    // A protobuf WatchEvent whose object holds JSON bytes, not an envelope.
    let input = fixture("k8s-testdata/HEAD/core.v1.WatchEvent.pb");
    let env = object::decode_envelope(&input).unwrap();
    let mut frame = (env.raw.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&env.raw);
    let mut d = WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT);
    d.push(Bytes::from(frame));
    // The fixture's type is "typeValue": not a real event type, reported as such.
    let err = d.next_event().unwrap_err();
    assert!(err.to_string().contains("typeValue"), "{err}");
    // With a real type, its JSON object decodes through the JSON path.
    use prost::Message;
    let mut ev = informer::wire::meta::WatchEvent::decode(env.raw.clone()).unwrap();
    ev.r#type = Some("MODIFIED".into());
    let inner = ev.object.as_ref().unwrap().raw.clone().unwrap();
    assert_eq!(inner.first(), Some(&b'{'), "the fixture embeds JSON");
    let msg = ev.encode_to_vec();
    let mut frame = (msg.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&msg);
    let mut d = WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT);
    d.push(Bytes::from(frame));
    let Some(WatchEvent::Modified(o)) = d.next_event().unwrap() else {
        panic!("not MODIFIED")
    };
    assert_eq!(o.encoding(), Encoding::Json);
    assert_eq!(
        o.gvk(),
        &GroupVersionKind::new("example.com", "v1", "CustomType")
    );
}

#[test]
fn lists_round_trip_in_both_encodings() {
    let gvk = GroupVersionKind::new("", "v1", "PodList");
    let ps = pods(5);
    let refs: Vec<&Object> = ps.iter().collect();
    let bytes = encode_list_protobuf(&gvk, "12345", "next-token", Some(10), &refs).unwrap();
    let list = decode_list(bytes).unwrap();
    assert_eq!(list.list_gvk, gvk);
    assert_eq!(list.resource_version, "12345");
    assert_eq!(list.continue_token, "next-token");
    assert_eq!(list.remaining_item_count, Some(10));
    assert_eq!(list.items.len(), 5);
    for (a, b) in list.items.iter().zip(&ps) {
        assert_eq!(a.meta(), b.meta());
        assert_eq!(a.raw().unwrap(), b.raw().unwrap());
        assert_eq!(a.gvk().kind, "Pod");
    }

    let js = json_pods(3);
    let refs: Vec<&Object> = js.iter().collect();
    let bytes = encode_list_json(&gvk, "77", "", None, &refs).unwrap();
    let list = decode_list(bytes).unwrap();
    assert_eq!(list.resource_version, "77");
    assert_eq!(list.continue_token, "");
    assert_eq!(list.items.len(), 3);
    assert_eq!(list.items[2].name(), "am-2");
    assert_eq!(list.items[2].meta(), js[2].meta());
}

#[test]
fn json_list_items_without_kind_take_the_lists() {
    let doc = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5","continue":"c"},"items":[{"metadata":{"name":"a","namespace":"n"}}]}"#;
    let list = decode_list(Bytes::from_static(doc)).unwrap();
    assert_eq!(list.items[0].gvk(), &GroupVersionKind::new("", "v1", "Pod"));
    assert_eq!(list.items[0].key().as_str(), "n/a");
}

#[test]
fn with_meta_keeps_every_other_field() {
    let base = object::decode(fixture("k8s-testdata/HEAD/core.v1.Pod.pb")).unwrap();
    let mut m = base.meta().to_fields();
    m.name = "renamed".into();
    let re = base.with_meta(ObjectMeta::from(m.clone())).unwrap();
    assert_eq!(re.meta(), &m);
    let a: k8s_pb::api::core::v1::Pod = base.decode().unwrap();
    let b: k8s_pb::api::core::v1::Pod = re.decode().unwrap();
    assert_eq!(a.spec, b.spec);
    assert_eq!(a.status, b.status);
    assert_eq!(b.metadata.unwrap().name.as_deref(), Some("renamed"));
    // Dropping managedFields shrinks the object and keeps the rest.
    let slim = base.without_managed_fields().unwrap();
    assert!(slim.meta().managed_fields().is_empty());
    assert!(slim.raw_len() < base.raw_len());
    // A decoded re-encoding reads back identically.
    let again = object::decode(re.to_wire().unwrap()).unwrap();
    assert_eq!(
        again,
        Object::from_parts(
            Arc::new(re.gvk().clone()),
            ObjectMeta::from(m),
            re.raw().unwrap().clone(),
            Encoding::Protobuf
        )
    );
}

#[test]
fn frames_decode_with_prost_too() {
    // An independent decoder (prost, from proto/) agrees with our hand-sized frame encoder.
    use prost::Message;
    for ev in events(&pods(3)) {
        let mut out = Vec::new();
        encode_watch_frame(&ev, &mut out).unwrap();
        let len = u32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
        assert_eq!(len + 4, out.len());
        let pb = informer::wire::meta::WatchEvent::decode(&out[4..]).unwrap();
        assert_eq!(pb.r#type.as_deref(), Some(ev.event_type().as_str()));
        let raw = pb.object.unwrap().raw.unwrap();
        let env = informer::wire::runtime::Unknown::decode(&raw[4..]).unwrap();
        if let Some(o) = ev.object() {
            assert_eq!(env.raw.as_deref(), Some(&o.raw().unwrap()[..]));
            assert_eq!(
                env.type_meta.unwrap().kind.as_deref(),
                Some(o.gvk().kind.as_str())
            );
        }
    }
}

/// A stream cut into chunks at arbitrary points, as an HTTP client receives it: after each
/// chunk is decoded, the decoder holds no reference to it (the start of an incomplete frame or
/// line is copied out), so the client can reuse its read buffer. Events still come out whole
/// and in order.
#[test]
fn decoded_chunks_are_released_even_mid_frame() {
    for (objs, format) in [
        (pods(4), WatchFormat::Protobuf),
        (json_pods(2), WatchFormat::Json),
    ] {
        let evs = events(&objs);
        let stream = encode(&evs, format);
        // Cuts that fall inside frames: thirds of an object, and a few tiny pieces.
        let step = stream.len() / 7;
        let mut cuts = vec![1, 2, 3];
        cuts.extend((1..7).map(|i| i * step + i));
        cuts.push(stream.len());
        let mut d = WatchDecoder::new(format, DEFAULT_FRAME_LIMIT);
        let mut got = Vec::new();
        let mut start = 0;
        for &end in &cuts {
            let chunk = Bytes::copy_from_slice(&stream[start..end]);
            start = end;
            d.push(chunk.clone());
            let mut sliced_out = Vec::new();
            while let Some(e) = d.next_event().unwrap() {
                if let Some(o) = e.object() {
                    let r = chunk.as_ptr() as usize..chunk.as_ptr() as usize + chunk.len();
                    if r.contains(&(o.raw().unwrap().as_ptr() as usize)) {
                        sliced_out.push(o.raw().unwrap().clone());
                    }
                }
                got.push(e);
            }
            // Only zero-copy objects (large frames wholly inside the chunk) may share it.
            if sliced_out.is_empty() {
                assert!(
                    chunk.is_unique(),
                    "{format:?}: chunk ending at {end} still referenced by the decoder"
                );
            }
        }
        assert!(d.finish().unwrap().is_none());
        assert_eq!(got.len(), evs.len(), "{format:?}");
        assert!(got.iter().zip(&evs).all(|(a, b)| same(a, b)), "{format:?}");
    }
}

#[test]
fn watch_events_of_changing_kinds_keep_their_own_group_version_kind() {
    // The decoder shares one GVK between consecutive objects of the same kind, matched against
    // the envelope's typeMeta without allocating: a change of group, version or kind (or of the
    // core group to a named one) must give the new GVK, and a change back the old one.
    let base = pods(1).remove(0);
    let kinds = [
        GroupVersionKind::new("", "v1", "Pod"),
        GroupVersionKind::new("", "v1", "Pod"),
        GroupVersionKind::new("apps", "v1", "Pod"),
        GroupVersionKind::new("apps", "v2", "Pod"),
        GroupVersionKind::new("apps", "v2", "ReplicaSet"),
        GroupVersionKind::new("", "v1", "Pod"),
        GroupVersionKind::new("v1", "", "Pod"),
    ];
    let events: Vec<WatchEvent> = kinds
        .iter()
        .map(|gvk| {
            WatchEvent::Modified(Object::from_parts(
                Arc::new(gvk.clone()),
                base.meta().clone(),
                base.raw().unwrap().clone(),
                Encoding::Protobuf,
            ))
        })
        .collect();
    let stream = encode(&events, WatchFormat::Protobuf);
    let got = decode_chunked(&stream, &[], WatchFormat::Protobuf);
    let got: Vec<GroupVersionKind> = got
        .iter()
        .map(|e| e.object().unwrap().gvk().clone())
        .collect();
    // `v1/` (group "v1", empty version) is written as apiVersion `v1/` and reads back the same.
    assert_eq!(got, kinds);

    let pod = GroupVersionKind::new("", "v1", "Pod");
    assert!(pod.matches_api_version("v1", "Pod"));
    assert!(!pod.matches_api_version("v1", "Pods"));
    assert!(!pod.matches_api_version("core/v1", "Pod"));
    assert!(!pod.matches_api_version("apps/v1", "Pod"));
    let rs = GroupVersionKind::new("apps", "v1", "ReplicaSet");
    assert!(rs.matches_api_version("apps/v1", "ReplicaSet"));
    assert!(!rs.matches_api_version("v1", "ReplicaSet"));
    assert!(!rs.matches_api_version("apps/v1beta1", "ReplicaSet"));
    for (api_version, kind) in [("a/b/c", "K"), ("", ""), ("/", "K"), ("x/", "")] {
        let gvk = GroupVersionKind::from_api_version(api_version, kind);
        assert!(
            gvk.matches_api_version(api_version, kind),
            "{api_version} {kind}"
        );
    }
}
