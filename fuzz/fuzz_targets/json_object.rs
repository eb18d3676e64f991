//! JSON object decode (`object::decode` on a document) on arbitrary bytes.
//!
//! Invariants beyond "no panic":
//! - a decoded JSON object keeps the input itself as its raw bytes (same memory, same length);
//! - its `metadata` member, when present, is an object (or null);
//! - its managed fields, when present, are a slice of the input;
//! - `with_meta` of its own metadata (the `metadata` member re-rendered, the other members kept)
//!   decodes back to the same metadata (timestamps to the second) and kind, whenever the document re-renders at all
//!   (serde_json's `Value` refuses some documents its validating skip accepts, such as numbers
//!   out of `f64` range);
//! - `without_managed_fields` decodes back to the same metadata minus managed fields.

#![no_main]

use bytes::Bytes;
use informer::object::{self, Encoding, ObjectMeta, ObjectMetaFields};
use informer_fuzz::is_slice_of;
use libfuzzer_sys::fuzz_target;

/// What survives a JSON re-render: managed fields are compared apart (they are re-serialized,
/// so their bytes change), and timestamps keep whole seconds only, as Kubernetes writes them
/// (`metav1.Time` marshals RFC 3339 without a fraction; a fraction on input is read, then lost).
fn sans_managed(m: &ObjectMeta) -> ObjectMetaFields {
    let mut m = m.to_fields();
    m.managed_fields.clear();
    for t in [&mut m.creation_timestamp, &mut m.deletion_timestamp]
        .into_iter()
        .flatten()
    {
        t.nanos = 0;
    }
    m
}

fuzz_target!(|data: &[u8]| {
    let input = Bytes::copy_from_slice(data);
    let Ok(obj) = object::decode(input.clone()) else {
        return;
    };
    if obj.encoding() != Encoding::Json {
        return;
    }
    assert_eq!(
        obj.raw().unwrap().as_ptr(),
        input.as_ptr(),
        "JSON object raw is not the input"
    );
    assert_eq!(obj.raw_len(), input.len());
    for mf in obj.meta().managed_fields() {
        assert!(
            is_slice_of(&input, mf),
            "managed fields are not a slice of the input"
        );
    }
    // A document serde_json::Value cannot hold (e.g. 1e400) cannot be re-rendered; anything it
    // can hold must round-trip.
    let doc = serde_json::from_slice::<serde_json::Value>(&input).ok();
    let renders = doc.is_some();
    if let Some(doc) = &doc {
        let meta = doc.get("metadata").unwrap_or(&serde_json::Value::Null);
        assert!(
            meta.is_object() || meta.is_null(),
            "a metadata member that is not a JSON object was accepted: {meta}"
        );
    }
    match obj.with_meta(obj.meta().clone()) {
        Ok(again) => {
            let back =
                object::decode(again.to_wire().unwrap()).expect("re-rendered document decodes");
            assert_eq!(back.gvk(), obj.gvk(), "kind changed through with_meta");
            assert_eq!(
                sans_managed(back.meta()),
                sans_managed(obj.meta()),
                "metadata changed"
            );
            assert_eq!(
                back.meta().managed_fields().len(),
                obj.meta().managed_fields().len(),
                "managed fields lost"
            );
        }
        Err(e) => assert!(!renders, "with_meta failed on a renderable document: {e:?}"),
    }
    match obj.without_managed_fields() {
        Ok(lean) => {
            let back = object::decode(lean.to_wire().unwrap()).expect("lean document decodes");
            assert!(back.meta().managed_fields().is_empty());
            assert_eq!(sans_managed(back.meta()), sans_managed(obj.meta()));
        }
        Err(e) => assert!(!renders, "without_managed_fields failed: {e:?}"),
    }
});
