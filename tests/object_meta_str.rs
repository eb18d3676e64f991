//! Packed metadata strings and the sorted label map ([`StrMap`]): decoded strings lie back to
//! back in one buffer of the metadata's own (not in the received bytes), JSON escapes are
//! unescaped, repeated and unsorted map entries follow protobuf / Go JSON semantics (sorted,
//! last value wins), bad UTF-8 is a typed error, and re-encoding metadata does not keep the old
//! buffer alive.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use informer::object::{self, DecodeError, GroupVersionKind, Str, StrMap};

fn fixture(p: &str) -> Bytes {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures")
        .join(p);
    Bytes::from(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// Whether `s`'s bytes lie inside `buf`.
fn inside(buf: &[u8], s: &str) -> bool {
    let (b, p) = (buf.as_ptr() as usize, s.as_ptr() as usize);
    p >= b && p + s.len() <= b + buf.len()
}

fn all_strings(m: &object::ObjectMeta) -> Vec<&str> {
    let mut v = vec![
        m.namespace(),
        m.name(),
        m.generate_name(),
        m.uid(),
        m.resource_version(),
    ];
    for (k, val) in m.labels() {
        v.extend([k, val]);
    }
    for (k, val) in m.annotations() {
        v.extend([k, val]);
    }
    for o in m.owner_references() {
        v.extend([o.api_version, o.kind, o.name, o.uid]);
    }
    v.extend(m.finalizers());
    v
}

/// Every string of `m` starts where the one before ends (one buffer, no gaps but the key's
/// `/` between namespace and name, so that the text starts with the key), and no string lies
/// in `input`.
fn assert_packed_outside(m: &object::ObjectMeta, input: &[u8], what: &str) {
    let strings = all_strings(m);
    assert!(
        strings.iter().filter(|s| !s.is_empty()).count() >= 10,
        "{what}: {strings:?}"
    );
    let key = m.key();
    assert_eq!(
        key.as_str(),
        format!("{}/{}", m.namespace(), m.name()),
        "{what}"
    );
    for (i, w) in strings.windows(2).enumerate() {
        let slash = usize::from(i == 0 && !w[0].is_empty());
        assert_eq!(
            w[0].as_ptr() as usize + w[0].len() + slash,
            w[1].as_ptr() as usize,
            "{what}: {:?} does not follow {:?}",
            w[1],
            w[0]
        );
    }
    for s in strings.iter().filter(|s| !s.is_empty()) {
        assert!(!inside(input, s), "{what}: {s:?} is a slice of the input");
    }
}

#[test]
fn decoded_metadata_strings_lie_back_to_back_in_a_buffer_of_their_own() {
    for path in [
        "k8s-testdata/HEAD/core.v1.Pod.pb",
        "real/openshift-insights-real-objects/pods/openshift-monitoring_prometheus-k8s-0.json",
    ] {
        let input = fixture(path);
        let obj = object::decode(input.clone()).unwrap();
        assert_packed_outside(obj.meta(), &input, path);
        // The key shares the text, unless that would keep kilobytes alive with it (the
        // OpenShift Pod's annotations).
        let shared = obj.key().as_str().as_ptr() == obj.meta().namespace().as_ptr();
        assert_eq!(shared, path.ends_with(".pb"), "{path}");
        // Built from fields, the same layout.
        let built = object::ObjectMeta::from(obj.meta().to_fields());
        assert_eq!(&built, obj.meta(), "{path}");
        assert_packed_outside(&built, &input, path);
    }
}

#[test]
fn json_strings_with_escapes_are_unescaped() {
    let doc = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a\u00e9b","namespace":"ns",
        "labels":{"k\"q":"v\\n","plain":"x"},"finalizers":["f\/1"],
        "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"r\ts","uid":"u"}]}}"#;
    let input = Bytes::from_static(doc);
    let obj = object::decode(input.clone()).unwrap();
    let m = obj.meta();
    assert_eq!(m.name(), "aéb");
    assert_eq!(m.namespace(), "ns");
    assert_eq!(m.labels().get("k\"q").unwrap(), "v\\n");
    assert_eq!(m.labels().get("plain").unwrap(), "x");
    assert!(m.finalizers().eq(["f/1"]));
    assert_eq!(m.owner_references().next().unwrap().name, "r\ts");
    assert_eq!(m.owner_references().next().unwrap().kind, "ReplicaSet");
}

/// A length-delimited protobuf field.
fn field(out: &mut Vec<u8>, number: u8, body: &[u8]) {
    out.push((number << 3) | 2);
    assert!(body.len() < 128);
    out.push(body.len() as u8);
    out.extend_from_slice(body);
}

fn label_entry(meta: &mut Vec<u8>, k: &[u8], v: &[u8]) {
    let mut e = Vec::new();
    field(&mut e, 1, k);
    field(&mut e, 2, v);
    field(meta, 11, &e);
}

fn object_with_meta(meta: &[u8]) -> Bytes {
    let mut raw = Vec::new();
    field(&mut raw, 1, meta);
    object::encode_envelope(&GroupVersionKind::new("", "v1", "Pod"), &raw)
}

/// The object's labels in iteration order.
fn labels_of(obj: &object::Object) -> Vec<(&str, &str)> {
    obj.meta().labels().iter().collect()
}

#[test]
fn unsorted_and_repeated_protobuf_map_entries_are_sorted_and_the_last_wins() {
    let mut meta = Vec::new();
    field(&mut meta, 1, b"p");
    label_entry(&mut meta, b"b", b"1");
    label_entry(&mut meta, b"a", b"2");
    label_entry(&mut meta, b"b", b"3");
    label_entry(&mut meta, b"c", b"4");
    let obj = object::decode(object_with_meta(&meta)).unwrap();
    let labels = labels_of(&obj);
    assert_eq!(labels, [("a", "2"), ("b", "3"), ("c", "4")]);
    assert_eq!(obj.meta().labels().get("b"), Some("3"));
    assert_eq!(obj.name(), "p");
    assert_eq!(obj.key().as_str(), "p");
}

#[test]
fn repeated_json_label_keys_keep_the_last_value() {
    let doc = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","labels":{"b":"1","a":"2","b":"3"}}}"#;
    let obj = object::decode(Bytes::from_static(doc)).unwrap();
    let labels = labels_of(&obj);
    assert_eq!(labels, [("a", "2"), ("b", "3")]);
}

#[test]
fn invalid_utf8_in_a_label_is_a_typed_error() {
    let mut meta = Vec::new();
    field(&mut meta, 1, b"p");
    label_entry(&mut meta, b"k", &[b'v', 0xff]);
    match object::decode(object_with_meta(&meta)) {
        Err(DecodeError::InvalidUtf8 { field: 2, .. }) => {}
        other => panic!("expected InvalidUtf8 in the map entry's value, got {other:?}"),
    }
    let mut meta = Vec::new();
    field(&mut meta, 3, &[0xc3]);
    assert!(matches!(
        object::decode(object_with_meta(&meta)),
        Err(DecodeError::InvalidUtf8 { field: 3, .. })
    ));
}

/// Invalid UTF-8 is an error wherever it is, also in a string a later one replaces (a single
/// field repeated, a repeated label key, a map entry's key given twice, an owner's name given
/// twice) or split across two strings that are valid only together.
#[test]
fn invalid_utf8_in_a_replaced_or_split_string_is_a_typed_error() {
    let owner = |names: &[&[u8]]| {
        let mut o = Vec::new();
        for n in names {
            field(&mut o, 3, n);
        }
        o
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("name given twice", {
            let mut m = Vec::new();
            field(&mut m, 1, &[0xff]);
            field(&mut m, 1, b"ok");
            m
        }),
        ("label key repeated", {
            let mut m = Vec::new();
            label_entry(&mut m, b"k", &[0xff]);
            label_entry(&mut m, b"k", b"v");
            m
        }),
        ("map entry key given twice", {
            let mut e = Vec::new();
            field(&mut e, 1, &[0xff]);
            field(&mut e, 1, b"k");
            field(&mut e, 2, b"v");
            let mut m = Vec::new();
            field(&mut m, 11, &e);
            m
        }),
        ("owner name given twice", {
            let mut m = Vec::new();
            field(&mut m, 13, &owner(&[&[0xff], b"n"]));
            m
        }),
        ("é split across name and generateName", {
            let mut m = Vec::new();
            field(&mut m, 1, &[b'a', 0xc3]);
            field(&mut m, 2, &[0xa9, b'b']);
            m
        }),
    ];
    for (what, meta) in cases {
        match object::decode(object_with_meta(&meta)) {
            Err(DecodeError::InvalidUtf8 { .. }) => {}
            other => panic!("{what}: expected InvalidUtf8, got {other:?}"),
        }
    }
    // The same shapes with valid strings decode, the last value winning.
    let mut m = Vec::new();
    field(&mut m, 1, b"first");
    field(&mut m, 1, b"ok");
    label_entry(&mut m, b"k", b"old");
    label_entry(&mut m, b"k", b"v");
    field(&mut m, 13, &owner(&[b"x", b"n"]));
    let obj = object::decode(object_with_meta(&m)).unwrap();
    assert_eq!(obj.name(), "ok");
    assert_eq!(labels_of(&obj), [("k", "v")]);
    assert_eq!(obj.meta().owner_references().next().unwrap().name, "n");
}

#[test]
fn with_meta_does_not_keep_the_old_buffer() {
    let obj = object::decode(fixture("k8s-testdata/HEAD/core.v1.Pod.pb")).unwrap();
    assert!(!obj.meta().managed_fields().is_empty());
    let lean = obj.without_managed_fields().unwrap();
    assert!(lean.meta().managed_fields().is_empty());
    for s in all_strings(lean.meta())
        .into_iter()
        .filter(|s| !s.is_empty())
    {
        assert!(
            !inside(&obj.raw().unwrap(), s),
            "{s:?} still points into the old bytes"
        );
    }
    // Metadata the encoding cannot give back exactly (a JSON fraction of a second) is copied.
    let json = object::decode(fixture(
        "real/openshift-insights-real-objects/pods/openshift-monitoring_prometheus-k8s-0.json",
    ))
    .unwrap();
    let mut m = json.meta().to_fields();
    if let Some(t) = m.creation_timestamp.as_mut() {
        t.nanos = 5;
    }
    let again = json.with_meta(m.clone().into()).unwrap();
    assert_eq!(again.meta(), &m);
    for s in all_strings(again.meta())
        .into_iter()
        .filter(|s| !s.is_empty())
    {
        assert!(
            !inside(&json.raw().unwrap(), s),
            "{s:?} still points into the old document"
        );
    }
}

#[test]
fn str_map_reads_like_a_sorted_map() {
    let mut m: StrMap = [("b", "2"), ("a", "1"), ("b", "3")].into_iter().collect();
    assert_eq!(m.len(), 2);
    assert_eq!(m["b"], "3");
    assert!(m.contains_key("a") && !m.contains_key("c"));
    assert_eq!(m.insert("c".into(), "4".into()), None);
    assert_eq!(m.insert("a".into(), "0".into()), Some(Str::from("1")));
    assert_eq!(m.keys().map(|k| &**k).collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(m.remove("b"), Some(Str::from("3")));
    assert_eq!(m.get("b"), None);
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(json, r#"{"a":"0","c":"4"}"#);
    let back: StrMap = serde_json::from_str(&json).unwrap();
    assert_eq!(back, m);
    m.retain(|k, _| k != "a");
    assert_eq!(format!("{m:?}"), r#"{"c": "4"}"#);
    m.clear();
    assert!(m.is_empty());
}

#[test]
fn object_keys_are_built_once_and_shared() {
    let obj = Arc::new(object::decode(fixture("k8s-testdata/HEAD/core.v1.Pod.pb")).unwrap());
    let (a, b) = (obj.key(), obj.key());
    assert!(
        std::ptr::eq(a.as_str(), b.as_str()),
        "the key is one shared allocation"
    );
    assert_eq!(
        a.as_str(),
        format!("{}/{}", obj.namespace(), obj.name()).as_str()
    );
    // Keys longer than the inline buffer are built too.
    let long = "n".repeat(400);
    assert_eq!(
        object::ObjectKey::new("ns", &long).as_str(),
        format!("ns/{long}")
    );
}
