//! Compact cached objects ([`Compactor`]): a compacted object equals the original (metadata,
//! bytes, typed and serde decodes), its body is a zstd frame, its metadata keeps nothing of the
//! received buffer, strings that repeat across objects are shared, and a dictionary that does
//! not load is a typed error.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use informer::object::{self, Compactor, DecodeError, Dictionary, Object, ObjectMeta};

fn fixture(p: &str) -> Bytes {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures")
        .join(p);
    let mut b = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    // The etcd dump ends with the newline its tool printed after the value.
    if b.starts_with(&object::MAGIC) && b.last() == Some(&b'\n') {
        b.pop();
    }
    Bytes::from(b)
}

const FIXTURES: [&str; 3] = [
    "k8s-testdata/HEAD/core.v1.Pod.pb",
    "k8s-testdata/HEAD/core.v1.Pod.json",
    "real/auger-etcd-real-protobuf/storage__pod.bin",
];

fn strings(m: &ObjectMeta) -> Vec<&str> {
    let mut v = vec![
        m.name(),
        m.generate_name(),
        m.namespace(),
        m.uid(),
        m.resource_version(),
    ];
    for (k, val) in m.labels().iter().chain(m.annotations().iter()) {
        v.extend([k, val]);
    }
    for o in m.owner_references() {
        v.extend([o.api_version, o.kind, o.name, o.uid]);
    }
    v.extend(m.finalizers());
    v
}

fn inside(buf: &[u8], s: &[u8]) -> bool {
    let (b, p) = (buf.as_ptr() as usize, s.as_ptr() as usize);
    !s.is_empty() && p >= b && p + s.len() <= b + buf.len()
}

/// A dictionary made of the object's own bytes (a raw-content dictionary: enough for tests).
fn dict_of(obj: &Object) -> Arc<Dictionary> {
    Arc::new(Dictionary::from_bytes(&obj.raw().unwrap(), 3).unwrap())
}

#[test]
fn compacted_objects_equal_the_originals() {
    for path in FIXTURES {
        let input = fixture(path);
        let obj = object::decode(input.clone()).unwrap();
        let mut c = Compactor::new(dict_of(&obj));
        let small = c.compact(&obj).unwrap();
        assert!(small.is_compressed() && !obj.is_compressed(), "{path}");
        assert!(Arc::ptr_eq(
            small.compressed_with().unwrap(),
            c.dictionary()
        ));
        assert_eq!(small.meta(), obj.meta(), "{path}");
        assert_eq!(small.key(), obj.key());
        // The compact key shares the compact metadata's text (small now: its tail is shared),
        // not the received object's.
        assert_eq!(
            small.key().as_str().as_ptr(),
            small.meta().namespace().as_ptr(),
            "{path}"
        );
        assert_eq!(small.gvk(), obj.gvk());
        assert_eq!(small.encoding(), obj.encoding());
        assert_eq!(small.raw().unwrap(), obj.raw().unwrap(), "{path}");
        assert_eq!(small.raw_len(), obj.raw_len());
        assert!(
            small.cached_len() * 10 < obj.cached_len(),
            "{path}: {}",
            small.cached_len()
        );
        assert_eq!(small, obj, "{path}: objects compare by content");
        assert_eq!(small.to_wire().unwrap(), obj.to_wire().unwrap());
        match obj.encoding() {
            object::Encoding::Protobuf => {
                let a: k8s_pb::api::core::v1::Pod = obj.decode().unwrap();
                let b: k8s_pb::api::core::v1::Pod = small.decode().unwrap();
                assert_eq!(a, b, "{path}");
            }
            object::Encoding::Json => {
                let a: k8s_openapi::api::core::v1::Pod = obj.deserialize().unwrap();
                let b: k8s_openapi::api::core::v1::Pod = small.deserialize().unwrap();
                assert_eq!(a, b, "{path}");
                assert_eq!(small.to_json_value().unwrap(), obj.to_json_value().unwrap());
            }
        }
        // Nothing of the compact form points into the received buffer any more.
        for s in strings(small.meta()) {
            assert!(
                !inside(&input, s.as_bytes()),
                "{path}: {s:?} still in the input"
            );
        }
        for m in small.meta().managed_fields() {
            assert!(
                !inside(&input, m),
                "{path}: a managed-fields entry still in the input"
            );
        }
        // Compacting again with the same dictionary changes nothing.
        let again = c.compact(&small).unwrap();
        assert_eq!(again.raw().unwrap(), obj.raw().unwrap());
    }
}

#[test]
fn a_dictionary_that_does_not_load_is_a_typed_error() {
    // zstd's dictionary magic, then a header zstd cannot parse.
    let mut bad = 0xEC30_A437u32.to_le_bytes().to_vec();
    bad.extend_from_slice(&[0xff; 60]);
    assert!(matches!(
        Dictionary::from_bytes(&bad, 3),
        Err(DecodeError::Compression { .. })
    ));
    // Too little to train on.
    assert!(matches!(
        Dictionary::train(&[b"x".to_vec()], 4096, 3),
        Err(DecodeError::Compression { .. })
    ));
}

#[test]
fn objects_from_different_dictionaries_recompress() {
    let obj = object::decode(fixture(FIXTURES[2])).unwrap();
    let (d1, d2) = (dict_of(&obj), dict_of(&obj));
    assert_ne!(d1.id(), d2.id());
    let first = Compactor::new(d1).compact(&obj).unwrap();
    let mut c2 = Compactor::new(d2.clone());
    let second = c2.compact(&first).unwrap();
    assert!(Arc::ptr_eq(second.compressed_with().unwrap(), &d2));
    assert_eq!(second.raw().unwrap(), obj.raw().unwrap());
}

/// `obj` re-keyed as one of its siblings: another name, uid and resourceVersion, the same
/// labels, annotations, owners and finalizers (as the Pods of one ReplicaSet).
fn sibling(obj: &Object, i: usize) -> Object {
    let mut f = obj.meta().to_fields();
    f.name = format!("{}-{i}", obj.meta().name()).into();
    f.uid = format!("uid-{i}").into();
    f.resource_version = format!("{}", 1000 + i).into();
    Object::from_parts(
        Arc::new(obj.gvk().clone()),
        f.into(),
        obj.raw().unwrap(),
        obj.encoding(),
    )
}

#[test]
fn siblings_share_one_metadata_tail_and_read_the_same() {
    for path in FIXTURES {
        let obj = object::decode(fixture(path)).unwrap();
        let mut compactor = Compactor::new(dict_of(&obj));
        let received: Vec<Object> = (0..3).map(|i| sibling(&obj, i)).collect();
        let small: Vec<Object> = received
            .iter()
            .map(|o| compactor.compact(o).unwrap())
            .collect();
        for (r, s) in received.iter().zip(&small) {
            assert!(!r.meta().tail_is_shared());
            assert!(s.meta().tail_is_shared(), "{path}");
            assert_eq!(s.meta(), r.meta(), "{path}");
            assert_eq!(strings(s.meta()), strings(r.meta()), "{path}");
            assert_eq!(s.meta().to_fields(), r.meta().to_fields(), "{path}");
            let flags = |m: &ObjectMeta| {
                m.owner_references()
                    .map(|o| (o.controller, o.block_owner_deletion))
                    .collect::<Vec<_>>()
            };
            assert_eq!(flags(s.meta()), flags(r.meta()));
            // Compacting a compact object again changes nothing.
            assert_eq!(compactor.compact(s).unwrap().meta(), r.meta());
        }
        assert_eq!(compactor.tails().len(), 1, "{path}: one distinct tail");
        // Their tails are one copy: the first label (or annotation) of each lies at one address.
        let first = |o: &Object| {
            let m = o.meta();
            m.labels()
                .iter()
                .chain(m.annotations().iter())
                .next()
                .map(|(k, _)| k.as_ptr())
        };
        assert!(first(&small[0]).is_some());
        assert_eq!(first(&small[0]), first(&small[1]));
        assert_eq!(first(&small[1]), first(&small[2]));
        assert_ne!(small[0].meta(), small[1].meta());

        // Another label: another tail, and the objects still read as received.
        let mut f = received[0].meta().to_fields();
        f.labels.insert("extra".into(), "1".into());
        let other = Object::from_parts(
            Arc::new(obj.gvk().clone()),
            f.into(),
            obj.raw().unwrap(),
            obj.encoding(),
        );
        let s = compactor.compact(&other).unwrap();
        assert_eq!(s.meta(), other.meta());
        assert_eq!(s.meta().labels().get("extra"), Some("1"));
        assert_eq!(compactor.tails().len(), 2);
    }
}

#[test]
fn metadata_with_no_tail_stays_as_it_is() {
    let obj = object::decode(fixture(FIXTURES[0])).unwrap();
    let mut f = obj.meta().to_fields();
    f.labels.clear();
    f.annotations.clear();
    f.owner_references.clear();
    f.finalizers.clear();
    let bare = Object::from_parts(
        Arc::new(obj.gvk().clone()),
        f.into(),
        obj.raw().unwrap(),
        obj.encoding(),
    );
    let mut compactor = Compactor::new(dict_of(&obj));
    let s = compactor.compact(&bare).unwrap();
    assert!(!s.meta().tail_is_shared());
    assert_eq!(s.meta(), bare.meta());
    assert!(compactor.tails().is_empty());
}

/// Every cached object pays its struct: keep it from creeping up (a `Time` is 16 bytes and has
/// no spare bit, so the scalars are packed by hand; 264 bytes before the shared tail, 232
/// before the compressed body's length moved into its frame, 208 before the counts moved into
/// `ends` and the deletion fields and managed fields behind pointers). At most 176 bytes, an
/// `Arc<Object>` (two counts more) is a 192-byte block of mimalloc's, not a 224-byte one.
#[test]
fn the_object_struct_stays_small() {
    let (object, meta) = (size_of::<Object>(), size_of::<ObjectMeta>());
    assert!(meta <= 104, "ObjectMeta is {meta} bytes");
    assert!(object <= 176, "Object is {object} bytes");
}

/// Every protobuf fixture as the API server would write it today (its metadata re-encoded:
/// the fixtures' own set `selfLink`, an old field 15 or empty timestamps, so none re-encodes
/// exactly as it is): its compact form leaves the metadata out of the frame and reads back the
/// same bytes, metadata and typed object.
#[test]
fn objects_as_the_api_server_writes_them_compact_without_their_metadata() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/k8s-testdata/HEAD");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pb"))
        .collect();
    paths.sort();
    let (mut with_meta, mut without_meta, mut n) = (0, 0, 0);
    for path in paths {
        let Ok(received) = object::decode(Bytes::from(std::fs::read(&path).unwrap())) else {
            continue;
        };
        if received.meta().name().is_empty() {
            continue; // not an object with metadata (List, Status, options kinds)
        }
        let canonical = received.with_meta(received.meta().clone()).unwrap();
        let mut c = Compactor::new(dict_of(&canonical));
        let (a, b) = (
            c.compact(&received).unwrap(),
            c.compact(&canonical).unwrap(),
        );
        for (small, obj) in [(&a, &received), (&b, &canonical)] {
            assert_eq!(
                small.raw().unwrap(),
                obj.raw().unwrap(),
                "{}",
                path.display()
            );
            assert_eq!(small.raw_len(), obj.raw_len());
            assert_eq!(small.meta(), obj.meta());
            assert_eq!(small, obj);
            assert_eq!(small.to_wire().unwrap(), obj.to_wire().unwrap());
        }
        with_meta += a.cached_len();
        without_meta += b.cached_len();
        n += 1;
    }
    assert!(n > 100, "{n} fixtures");
    // The re-encoded objects' frames hold no metadata: much smaller in all.
    assert!(
        without_meta * 10 < with_meta * 9,
        "{without_meta} B of frames without metadata, {with_meta} B with"
    );
}
