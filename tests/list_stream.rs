//! `ListStream`: a list body fed in chunks decodes to exactly what `decode_list` makes of it
//! whole, wherever the chunks are cut; truncated, corrupt and oversized bodies get a typed
//! error, never a panic and never a different list.

mod support;

use bytes::Bytes;
use informer::object::{
    DecodeError, GroupVersionKind, ListStream, ObjectList, decode_list, encode_list_protobuf,
};
use informer::reflector::{ListOptions, ListerWatcher};
use proptest::prelude::*;

const LIMIT: usize = 1 << 20;

/// A list page of `n` varied objects of `templates`, as the simulator serves it.
fn served_list(templates: &str, n: usize, limit: Option<u32>) -> Bytes {
    let sim = support::sim(templates, |c| c.initial_objects(n).vary(true));
    let opts = ListOptions {
        limit,
        ..Default::default()
    };
    support::runtime().block_on(sim.list(&opts)).unwrap()
}

/// Feeds `body` cut at `cuts` (offsets, any order) and finishes: the items then the list.
fn streamed(body: &Bytes, cuts: &[usize], limit: usize) -> Result<ObjectList, DecodeError> {
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(body.len())).collect();
    cuts.sort_unstable();
    cuts.push(body.len());
    let mut stream = ListStream::new(limit);
    let mut items = Vec::new();
    let mut from = 0;
    for to in cuts {
        items.extend(stream.feed(body.slice(from..to))?);
        from = to;
    }
    let mut list = stream.finish()?;
    items.append(&mut list.items);
    list.items = items;
    Ok(list)
}

/// What the stream makes of `body` is what `decode_list` makes of it, or an error.
fn check_never_different(body: &Bytes, cuts: &[usize]) {
    if let Ok(list) = streamed(body, cuts, LIMIT) {
        let whole =
            decode_list(body.clone()).expect("the stream accepted a body decode_list rejects");
        assert_eq!(list, whole);
    }
}

/// `body` with `flips` (index, byte) written into it, checked cut at `cuts`.
fn check_corrupted(
    body: &mut [u8],
    flips: &[(prop::sample::Index, u8)],
    cuts: &[prop::sample::Index],
) {
    for (at, byte) in flips {
        body[at.index(body.len())] = *byte;
    }
    let body = Bytes::copy_from_slice(body);
    let cuts: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
    check_never_different(&body, &cuts);
}

#[test]
fn protobuf_lists_decode_the_same_however_the_body_is_cut() {
    for (templates, n, limit) in [
        ("etcd", 40, None),
        ("head", 12, Some(5)),
        ("both", 30, None),
    ] {
        let body = served_list(templates, n, limit);
        let whole = decode_list(body.clone()).unwrap();
        assert!(!whole.items.is_empty());
        // One chunk, every single cut, and byte by byte.
        assert_eq!(streamed(&body, &[], LIMIT).unwrap(), whole);
        let step = (body.len() / 400).max(1);
        for cut in (0..=body.len()).step_by(step) {
            assert_eq!(
                streamed(&body, &[cut], LIMIT).unwrap(),
                whole,
                "cut at {cut}"
            );
        }
        let every: Vec<usize> = (1..body.len()).collect();
        assert_eq!(streamed(&body, &every, LIMIT).unwrap(), whole);
    }
}

#[test]
fn items_come_out_as_their_bytes_arrive() {
    let body = served_list("etcd", 20, None);
    let whole = decode_list(body.clone()).unwrap();
    // Where each item's bytes end in the body (decode_list's items are slices of it).
    let ends: Vec<usize> = whole
        .items
        .iter()
        .map(|o| {
            let raw = o.raw().unwrap();
            raw.as_ptr() as usize - body.as_ptr() as usize + raw.len()
        })
        .collect();
    let mut stream = ListStream::new(LIMIT);
    let mut seen = 0;
    let mut fed = 0;
    for chunk in body.chunks(1000) {
        let got = stream.feed(Bytes::copy_from_slice(chunk)).unwrap();
        fed += chunk.len();
        for item in got {
            assert_eq!(item, whole.items[seen]);
            seen += 1;
        }
        // Every item whose bytes are all in is out, and none before.
        assert_eq!(
            seen,
            ends.iter().filter(|&&e| e <= fed).count(),
            "after {fed} bytes"
        );
    }
    assert_eq!(seen, whole.items.len());
    let list = stream.finish().unwrap();
    assert_eq!(list.resource_version, whole.resource_version);
    assert_eq!(list.list_gvk, GroupVersionKind::new("", "v1", "PodList"));
    assert!(list.items.is_empty());
}

#[test]
fn json_lists_decode_the_same_however_the_body_is_cut() {
    let body = served_list("json", 7, None);
    assert_eq!(body[0], b'{');
    let whole = decode_list(body.clone()).unwrap();
    assert_eq!(whole.items.len(), 7);
    // Every cut in the first and last 300 bytes (the list's own members), some in between.
    let n = body.len();
    for cut in (0..300)
        .chain((300..n - 300).step_by(211))
        .chain(n - 300..=n)
    {
        let got = streamed(&body, &[cut], LIMIT).unwrap();
        assert_eq!(got, whole, "cut at {cut}");
    }
    let sorted = sorted_members(&body);
    assert_eq!(decode_list(sorted.clone()).unwrap(), whole);
    for cut in (0..=sorted.len()).step_by(97) {
        assert_eq!(streamed(&sorted, &[cut, cut / 3], LIMIT).unwrap(), whole);
    }
}

#[test]
fn every_truncation_is_an_error_or_the_same_list() {
    let body = served_list("etcd", 6, None);
    for end in 0..body.len() {
        check_never_different(&body.slice(..end), &[end / 2]);
    }
    assert!(matches!(
        streamed(&body.slice(..body.len() - 1), &[], LIMIT),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn an_item_over_the_limit_fails_before_anything_is_allocated_for_it() {
    let body = served_list("etcd", 3, None);
    let whole = decode_list(body.clone()).unwrap();
    let largest = whole.items.iter().map(|o| o.raw_len()).max().unwrap();
    match streamed(&body, &[], largest - 1) {
        Err(DecodeError::FrameTooLarge { len, limit, .. }) => {
            assert_eq!(limit, largest - 1);
            assert!(len as usize >= largest);
        }
        other => panic!("expected FrameTooLarge, got {other:?}"),
    }
    // A length prefix of 2^60 bytes inside `raw` that announces more than is left: refused
    // from the prefix alone.
    let mut forged = body[..body.len() - whole.items.last().unwrap().raw_len() - 3].to_vec();
    forged.extend_from_slice(&[0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10]);
    let err = streamed(&Bytes::from(forged), &[], usize::MAX).unwrap_err();
    assert!(
        matches!(
            err,
            DecodeError::LengthOverrun { .. } | DecodeError::Truncated { .. }
        ),
        "{err:?}"
    );
}

#[test]
fn shapes_no_api_server_writes_are_refused_with_a_typed_error() {
    // typeMeta after raw: decode_list reads it whole, the stream says it does not.
    let gvk = GroupVersionKind::new("", "v1", "PodList");
    let body = encode_list_protobuf(&gvk, "5", "", None, &[]).unwrap();
    // k8s\0, then field 1 (typeMeta) and field 2 (raw): move typeMeta to the end.
    let env = &body[4..];
    let tm_len = env[1] as usize + 2;
    let mut swapped = body[..4].to_vec();
    swapped.extend_from_slice(&env[tm_len..]);
    swapped.extend_from_slice(&env[..tm_len]);
    let swapped = Bytes::from(swapped);
    assert_eq!(decode_list(swapped.clone()).unwrap().list_gvk, gvk);
    assert!(matches!(
        streamed(&swapped, &[], LIMIT),
        Err(DecodeError::Unsupported { .. })
    ));
    // Two raw fields.
    let mut twice = body.to_vec();
    twice.extend_from_slice(&env[tm_len..]);
    assert!(matches!(
        streamed(&Bytes::from(twice), &[], LIMIT),
        Err(DecodeError::Unsupported { .. })
    ));
    // Two ListMetas: merged by decode_list (the last version wins); the stream, which names
    // the first one's version early, refuses the second.
    let two = Bytes::from_static(b"k8s\0\x12\x0a\x0a\x03\x12\x015\x0a\x03\x12\x013");
    assert_eq!(decode_list(two.clone()).unwrap().resource_version, "3");
    assert!(matches!(
        streamed(&two, &[], LIMIT),
        Err(DecodeError::Unsupported { .. })
    ));
    // Garbage.
    for junk in [
        &b""[..],
        b"k8",
        b"k8s\0\xff",
        b"\x00\x01\x02\x03\x04",
        b"[1,2]",
    ] {
        assert!(streamed(&Bytes::from_static(junk), &[1], LIMIT).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn corrupt_bodies_never_decode_to_another_list(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        thread_local! {
            static BODY: Bytes = served_list("etcd", 4, Some(3));
        }
        let mut body = BODY.with(|b| b.to_vec());
        check_corrupted(&mut body, &flips, &cuts);
    }

    #[test]
    fn random_cuts_of_a_valid_body_give_the_same_list(
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        thread_local! {
            static BODY: (Bytes, ObjectList) = {
                let b = served_list("both", 25, None);
                let l = decode_list(b.clone()).unwrap();
                (b, l)
            };
        }
        BODY.with(|(body, whole)| {
            let cuts: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
            prop_assert_eq!(&streamed(body, &cuts, LIMIT).unwrap(), whole);
            Ok(())
        })?;
    }
}

/// Two inputs the `list_protobuf` fuzz target found while `ListStream` was written.
#[test]
fn fuzz_found_an_empty_second_type_meta_and_a_raw_length_near_2_pow_64() {
    // A second, empty typeMeta keeps the first one's fields (protobuf merges), as in
    // decode_list; the stream used to reset the kind to empty.
    let mut body = b"k8s\0\x0a\x0f\x0a\x07apps/v1\x12\x04List\x0a\x00".to_vec();
    body.extend_from_slice(b"\x12\x02\x0a\x00");
    let body = Bytes::from(body);
    let whole = decode_list(body.clone()).unwrap();
    assert_eq!(whole.list_gvk, GroupVersionKind::new("apps", "v1", "List"));
    for cut in 0..=body.len() {
        assert_eq!(streamed(&body, &[cut], LIMIT).unwrap(), whole);
    }
    // A raw field announcing 2^64 - 1 bytes: the body ends inside it, no overflow.
    let mut huge = b"k8s\0\x12".to_vec();
    huge.extend_from_slice(&[0xff; 9]);
    huge.extend_from_slice(&[0x01, 0x0a, 0x00]);
    assert!(matches!(
        streamed(&Bytes::from(huge), &[7], LIMIT),
        Err(DecodeError::Truncated { .. })
    ));
}

/// Points a reviewer found (a fresh helper's adversarial pass over the first version).
#[test]
fn errors_stop_the_stream_and_name_a_byte_of_the_body() {
    // After an error, feeding on never yields items or a list.
    let mut stream = ListStream::new(LIMIT);
    assert!(
        stream
            .feed(Bytes::from_static(b"k8s\0\x12\x06\x12\x02\x0a\xff\x12\x00"))
            .is_err()
    );
    assert!(stream.feed(Bytes::from_static(b"\x0a\x00")).is_err());
    assert!(stream.finish().is_err());

    // A fixed-width field announced past what arrived: the offset is within the body.
    let body = Bytes::from_static(b"k8s\0\x12\x05\x19");
    match streamed(&body, &[], LIMIT) {
        Err(DecodeError::Truncated { offset, .. }) => assert!(offset <= body.len() as u64),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_json_list_in_one_chunk_is_decoded_without_a_copy() {
    let body = served_list("json", 3, None);
    let mut stream = ListStream::new(LIMIT);
    let items = stream.feed(body.clone()).unwrap();
    assert_eq!(items.len(), 3);
    assert!(stream.finish().unwrap().items.is_empty());
    // Items are slices of the one chunk fed.
    let raw = items[0].raw().unwrap();
    let start = raw.as_ptr() as usize;
    assert!(start >= body.as_ptr() as usize && start < body.as_ptr() as usize + body.len());
}

/// Counts `list_chunks` calls, else the simulator.
struct ChunkCounter {
    sim: informer::sim::SimServer,
    calls: std::sync::atomic::AtomicUsize,
}

impl ListerWatcher for ChunkCounter {
    type Body = informer::sim::SimWatch;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, informer::reflector::ApiError> {
        self.sim.list(opts).await
    }

    async fn list_chunks(
        &self,
        opts: &ListOptions,
    ) -> Result<informer::reflector::ListBody<Self::Body>, informer::reflector::ApiError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.sim
            .list(opts)
            .await
            .map(informer::reflector::ListBody::Whole)
    }

    async fn watch(
        &self,
        opts: &informer::reflector::WatchOptions,
    ) -> Result<informer::reflector::WatchResponse<Self::Body>, informer::reflector::ApiError> {
        self.sim.watch(opts).await
    }
}

/// The factory's wrapper (every factory informer's lister-watcher) reads pages through the
/// inner `list_chunks`, not its default: a reviewer found it did not.
#[test]
fn the_factorys_filtered_wrapper_streams_pages_too() {
    let inner = ChunkCounter {
        sim: support::sim("etcd", |c| c.initial_objects(3)),
        calls: Default::default(),
    };
    let filtered = informer::factory::Filtered::unfiltered(inner);
    let body = support::runtime()
        .block_on(filtered.list_chunks(&ListOptions::default()))
        .unwrap();
    assert!(matches!(body, informer::reflector::ListBody::Whole(_)));
    assert_eq!(
        filtered
            .inner()
            .calls
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

/// `body` (a JSON list as the simulator writes it: kind, apiVersion, metadata, items) with its
/// members in the order the API server writes a custom resource's list: sorted by name.
fn sorted_members(body: &[u8]) -> Bytes {
    let list = decode_list(Bytes::copy_from_slice(body)).unwrap();
    let mut out = format!(
        "{{\"apiVersion\":\"{}\",\"items\":[",
        list.list_gvk.api_version()
    )
    .into_bytes();
    for (i, item) in list.items.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",\n ");
        }
        out.extend_from_slice(&item.raw().unwrap());
    }
    out.extend_from_slice(
        format!(
            "],\"kind\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{}\"}}}}",
            list.list_gvk.kind, list.resource_version
        )
        .as_bytes(),
    );
    Bytes::from(out)
}

/// Where each of `list`'s items ends in `body` (its items are slices of it).
fn item_ends(body: &Bytes, list: &ObjectList) -> Vec<usize> {
    list.items
        .iter()
        .map(|o| {
            let raw = o.raw().unwrap();
            raw.as_ptr() as usize - body.as_ptr() as usize + raw.len()
        })
        .collect()
}

#[test]
fn json_items_come_out_as_their_bytes_arrive_in_either_member_order() {
    let plain = served_list("json", 12, None);
    for (body, version_first) in [(plain.clone(), true), (sorted_members(&plain), false)] {
        let whole = decode_list(body.clone()).unwrap();
        let ends = item_ends(&body, &whole);
        let mut stream = ListStream::new(LIMIT);
        let (mut seen, mut fed) = (0, 0);
        for chunk in body.chunks(997) {
            for item in stream.feed(Bytes::copy_from_slice(chunk)).unwrap() {
                assert_eq!(item, whole.items[seen]);
                seen += 1;
            }
            fed += chunk.len();
            // Every item whose bytes are all in is out, and none before: each names its kind.
            assert_eq!(seen, ends.iter().filter(|&&e| e <= fed).count());
            // The version is known as soon as `metadata` is read, if it comes first.
            if version_first && seen > 0 {
                assert_eq!(stream.resource_version(), Some(&*whole.resource_version));
            } else if !version_first {
                assert_eq!(stream.resource_version(), None);
            }
        }
        assert_eq!(seen, 12);
        let list = stream.finish().unwrap();
        assert_eq!(list.resource_version, whole.resource_version);
        assert_eq!(list.list_gvk, GroupVersionKind::new("", "v1", "PodList"));
        assert!(list.items.is_empty());
    }
}

/// A JSON list of `items` (object texts) with its members in `order`.
fn json_list(order: &[&str], items: &[&str]) -> Bytes {
    let members: Vec<String> = order
        .iter()
        .map(|m| match *m {
            "kind" => r#""kind":"WidgetList""#.to_owned(),
            "apiVersion" => r#""apiVersion":"example.com/v1""#.to_owned(),
            "metadata" => r#""metadata":{"resourceVersion":"77","continue":"c"}"#.to_owned(),
            "items" => format!(r#""items":[{}]"#, items.join(",")),
            other => other.to_owned(),
        })
        .collect();
    Bytes::from(format!("{{{}}}", members.join(",")))
}

#[test]
fn json_items_that_name_no_kind_wait_for_the_lists_kind() {
    let bare = [
        r#"{"metadata":{"name":"a","namespace":"n"}}"#,
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"b"}}"#,
        r#"{"metadata":{"name":"c"}}"#,
    ];
    let widget = GroupVersionKind::new("example.com", "v1", "Widget");
    // Kind first: every item comes out as it completes, with the list's item kind.
    let first = json_list(&["kind", "apiVersion", "metadata", "items"], &bare);
    let mut stream = ListStream::new(LIMIT);
    let items = stream.feed(first.clone()).unwrap();
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(|o| *o.gvk() == widget));
    assert_eq!(stream.resource_version(), Some("77"));
    // Kind last: the first item waits, and so do the others after it, in order.
    let last = json_list(&["apiVersion", "items", "kind", "metadata"], &bare);
    let mut stream = ListStream::new(LIMIT);
    assert!(stream.feed(last.clone()).unwrap().is_empty());
    assert_eq!(stream.resource_version(), None);
    let list = stream.finish().unwrap();
    assert_eq!(list.items.len(), 3);
    assert_eq!(list.items[2].name(), "c");
    assert!(list.items.iter().all(|o| *o.gvk() == widget));
    for body in [first, last] {
        let whole = decode_list(body.clone()).unwrap();
        for cut in 0..=body.len() {
            assert_eq!(streamed(&body, &[cut], LIMIT).unwrap(), whole);
        }
    }
}

#[test]
fn json_lists_no_decoder_would_read_are_refused_with_a_typed_error() {
    let item = r#"{"metadata":{"name":"a"}}"#;
    let order = ["kind", "apiVersion", "metadata", "items"];
    let good = json_list(&order, &[item, item]);
    assert_eq!(streamed(&good, &[9], LIMIT).unwrap().items.len(), 2);
    let text = std::str::from_utf8(&good).unwrap();
    for bad in [
        text.replace("},{", "} {"),                             // no comma
        text.replace("}]", "},]"),                              // trailing comma
        text.replace("[{", "[,{"),                              // leading comma
        text.replace("},{", "},1,{"),                           // not an object
        text.replace("},{", "},null,{"),                        // not an object
        text.replace(r#""a"}}]"#, r#""a"}]"#),                  // brackets unmatched
        text.replace("}]}", "}]"),                              // list not closed
        text.replace("}]}", "}]}x"),                            // trailing bytes
        text.replace(r#""items""#, r#""metadata":{},"items""#), // member named twice
        format!(r#"{},"items":[]}}"#, &text[..text.len() - 1]), // items named twice
        text.replace(r#""kind":"WidgetList""#, r#""kind":5"#),  // a member of the wrong type
    ] {
        let bad = Bytes::from(bad);
        assert!(decode_list(bad.clone()).is_err(), "{bad:?}");
        for cut in [0, 5, bad.len() / 2, bad.len() - 3] {
            match streamed(&bad, &[cut], LIMIT) {
                Err(DecodeError::Json { .. }) => {}
                other => panic!("{bad:?} cut at {cut}: {other:?}"),
            }
        }
    }
    // Invalid UTF-8 inside an item: the place is named, in the body.
    let mut raw = good.to_vec();
    let at = raw.windows(3).rposition(|w| w == br#""a""#).unwrap() + 1;
    raw[at] = 0xff;
    match streamed(&Bytes::from(raw), &[at], LIMIT) {
        Err(DecodeError::Json { offset, .. }) => assert!(offset < at as u64),
        other => panic!("{other:?}"),
    }
    // A member name with an escape still names the items.
    let escaped = Bytes::from(text.replace(r#""items""#, r#""it\u0065ms""#));
    assert_eq!(
        streamed(&escaped, &[3], LIMIT).unwrap(),
        decode_list(escaped.clone()).unwrap()
    );
    assert_eq!(decode_list(escaped).unwrap().items.len(), 2);
    // `items` that is not an array is the whole decoder's business.
    let null = json_list(&order, &[]);
    let null = Bytes::from(std::str::from_utf8(&null).unwrap().replace("[]", "null"));
    assert!(streamed(&null, &[], LIMIT).unwrap().items.is_empty());
}

#[test]
fn a_json_item_or_skeleton_over_the_limit_fails_before_it_is_gathered() {
    let body = served_list("json", 3, None);
    let whole = decode_list(body.clone()).unwrap();
    let largest = whole.items.iter().map(|o| o.raw_len()).max().unwrap();
    for cuts in [vec![], vec![100, 2000, 5000]] {
        match streamed(&body, &cuts, largest - 1) {
            Err(DecodeError::FrameTooLarge { len, limit, .. }) => {
                assert_eq!(limit, largest - 1);
                assert_eq!(len as usize, largest);
            }
            other => panic!("expected FrameTooLarge, got {other:?}"),
        }
    }
    assert_eq!(streamed(&body, &[100], largest).unwrap(), whole);
    // Not a list, and endless: refused once it passes the limit.
    let junk = Bytes::from(vec![b' '; 5000]);
    assert!(matches!(
        streamed(&junk, &[1000], 4096),
        Err(DecodeError::FrameTooLarge { .. })
    ));
}

#[test]
fn every_truncation_of_a_json_list_is_an_error_or_the_same_list() {
    let body = served_list("json", 2, None);
    for end in (0..body.len()).step_by(3) {
        check_never_different(&body.slice(..end), &[end / 2]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn corrupt_json_bodies_never_decode_to_another_list(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        sorted in any::<bool>(),
    ) {
        thread_local! {
            static BODIES: (Bytes, Bytes) = {
                let items = [
                    r#"{"metadata":{"name":"a","labels":{"x":"[{\"y\"}]"}},"s":[1,{"t":"]"}]}"#,
                    r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"}}"#,
                ];
                (
                    json_list(&["kind", "apiVersion", "metadata", "items"], &items),
                    json_list(&["apiVersion", "items", "kind", "metadata"], &items),
                )
            };
        }
        let mut body = BODIES.with(|b| if sorted { b.1.to_vec() } else { b.0.to_vec() });
        check_corrupted(&mut body, &flips, &cuts);
    }
}
