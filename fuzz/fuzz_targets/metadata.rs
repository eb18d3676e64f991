//! The hand-written `ObjectMeta` decoder on arbitrary message bodies: the input is the body of
//! field 1 of a bare object, wrapped in an envelope and decoded with `object::decode`.
//!
//! Invariants beyond "no panic":
//! - the object's raw bytes are a slice of the envelope it was decoded from;
//! - differential against prost's generated `meta.v1.ObjectMeta`: whenever prost accepts the
//!   body our decoder does too (unless an unknown field is a proto2 group, which we reject), and
//!   every field but the timestamps agrees (upstream replaces a repeated `Time` where protobuf
//!   would merge it, and reads an empty one as unset; we follow upstream);
//! - `with_meta` (re-encoding the metadata, keeping the other fields) and
//!   `without_managed_fields` decode back to the same metadata (minus managed fields);
//! - the compact form of the object, and of its re-encoded twin (whose metadata the compact
//!   body leaves out and writes back on reads), gives back the same bytes and metadata.

#![no_main]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use informer::object::{
    self, Compactor, DecodeError, Dictionary, GroupVersionKind, ObjectMeta, StrMapRef,
};
use informer::wire::meta as pb;
use informer_fuzz::assert_raw_in;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fuzz_target!(|data: &[u8]| {
    // Bare object: field 1 (ObjectMeta) = data, then one other field the decoders must keep.
    let mut bare = vec![0x0a];
    varint(&mut bare, data.len() as u64);
    bare.extend_from_slice(data);
    bare.extend_from_slice(&[0x12, 0x02, 0x08, 0x01]);
    let gvk = GroupVersionKind::new("", "v1", "Pod");
    let input = object::encode_envelope(&gvk, &bare);

    let ours = object::decode(input.clone());
    if let Ok(obj) = &ours {
        assert_raw_in(&input, obj);
        assert_eq!(&obj.raw().unwrap()[..], &bare[..]);
        round_trips(obj);
    }

    if let Ok(p) = pb::ObjectMeta::decode(data) {
        match &ours {
            Ok(obj) => agree(obj.meta(), &p),
            Err(DecodeError::BadTag {
                wire_type: 3 | 4, ..
            }) => {}
            Err(e) => panic!("prost accepts the metadata, we reject it: {e:?}"),
        }
    }
});

thread_local! {
    static COMPACTOR: RefCell<Compactor> = RefCell::new(Compactor::new(Arc::new(
        Dictionary::from_bytes(b"name namespace uid resourceVersion labels annotations", 3)
            .expect("a raw-content dictionary"),
    )));
}

/// The compact form of `obj` reads back as `obj`.
fn compacts(obj: &object::Object) {
    let small = COMPACTOR.with(|c| c.borrow_mut().compact(obj).expect("compaction"));
    assert!(small.is_compressed());
    assert_eq!(small.raw().unwrap(), obj.raw().unwrap(), "compact bytes");
    assert_eq!(small.raw_len(), obj.raw_len());
    assert_eq!(small.meta(), obj.meta(), "compact metadata");
    assert_eq!(&small, obj);
}

fn round_trips(obj: &object::Object) {
    compacts(obj);
    let again = obj
        .with_meta(obj.meta().clone())
        .expect("with_meta of a decoded object");
    compacts(&again);
    let back = object::decode(again.to_wire().unwrap()).expect("re-encoded object decodes");
    assert_eq!(
        back.meta(),
        obj.meta(),
        "metadata changed through with_meta"
    );
    assert_eq!(back.gvk(), obj.gvk());

    let lean = obj
        .without_managed_fields()
        .expect("without_managed_fields");
    let back =
        object::decode(lean.to_wire().unwrap()).expect("object without managed fields decodes");
    let mut want = obj.meta().to_fields();
    want.managed_fields.clear();
    assert_eq!(
        back.meta(),
        &want,
        "without_managed_fields changed other metadata"
    );
    // The other top-level field (2) is kept verbatim.
    assert!(back.raw().unwrap().ends_with(&[0x12, 0x02, 0x08, 0x01]));
}

fn agree(m: &ObjectMeta, p: &pb::ObjectMeta) {
    let s = |o: &Option<String>| o.clone().unwrap_or_default();
    assert_eq!(m.name(), s(&p.name), "name");
    assert_eq!(m.generate_name(), s(&p.generate_name), "generateName");
    assert_eq!(m.namespace(), s(&p.namespace), "namespace");
    assert_eq!(m.uid(), s(&p.uid), "uid");
    assert_eq!(
        m.resource_version(),
        s(&p.resource_version),
        "resourceVersion"
    );
    assert_eq!(m.generation(), p.generation, "generation");
    assert_eq!(
        m.deletion_grace_period_seconds(),
        p.deletion_grace_period_seconds,
        "deletionGracePeriodSeconds"
    );
    let ours = |map: StrMapRef<'_>| -> Vec<(String, String)> {
        map.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let theirs = |map: &BTreeMap<String, String>| -> Vec<(String, String)> {
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    assert_eq!(ours(m.labels()), theirs(&p.labels), "labels");
    assert_eq!(ours(m.annotations()), theirs(&p.annotations), "annotations");
    assert!(
        m.finalizers().eq(p.finalizers.iter().map(String::as_str)),
        "finalizers"
    );
    assert_eq!(
        m.owner_references().len(),
        p.owner_references.len(),
        "ownerReferences"
    );
    for (o, q) in m.owner_references().zip(&p.owner_references) {
        assert_eq!(o.kind, s(&q.kind));
        assert_eq!(o.name, s(&q.name));
        assert_eq!(o.uid, s(&q.uid));
        assert_eq!(o.api_version, s(&q.api_version));
        assert_eq!(o.controller, q.controller);
        assert_eq!(o.block_owner_deletion, q.block_owner_deletion);
    }
    assert_eq!(
        m.managed_fields().len(),
        p.managed_fields.len(),
        "managedFields"
    );
}
