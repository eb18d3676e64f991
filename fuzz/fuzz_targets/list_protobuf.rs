//! The protobuf list decoder (`decode_list` on `k8s\0` + `runtime.Unknown` around a `List`) on
//! arbitrary bytes.
//!
//! Invariants beyond "no panic":
//! - every item's raw bytes are a slice of the input;
//! - differential against prost's generated `meta.v1.List`: when we accept a list, prost
//!   accepts its body and agrees on resourceVersion, continue, remainingItemCount and the items'
//!   bytes;
//! - `encode_list_protobuf` of what was decoded decodes to an equal list;
//! - `ListStream`, fed the input in chunks cut where its first bytes say, never returns a
//!   list `decode_list` does not return.

#![no_main]

use bytes::Bytes;
use informer::object::{self, Encoding, MAGIC};
use informer::wire::meta as pb;
use informer_fuzz::{assert_raw_in, assert_stream_agrees};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let input = Bytes::copy_from_slice(data);
    let whole = object::decode_list(input.clone());
    assert_stream_agrees(&input, &whole);
    let Ok(list) = whole else {
        return;
    };
    if !input.starts_with(&MAGIC) {
        return; // a JSON list: the list_json target's business
    }
    for item in &list.items {
        assert_eq!(item.encoding(), Encoding::Protobuf);
        assert_raw_in(&input, item);
    }

    let env = object::decode_envelope(&input).expect("the list's envelope decodes");
    // Our list decoder skips unknown fields of every wire type it knows; prost may still reject
    // what we skip (e.g. a non-UTF-8 selfLink), so only compare when it accepts.
    if let Ok(p) = pb::List::decode(env.raw.clone()) {
        let meta = p.metadata.unwrap_or_default();
        assert_eq!(
            list.resource_version,
            meta.resource_version.unwrap_or_default()
        );
        assert_eq!(list.continue_token, meta.r#continue.unwrap_or_default());
        assert_eq!(list.remaining_item_count, meta.remaining_item_count);
        assert_eq!(
            list.items.len(),
            p.items.len(),
            "item count differs from prost"
        );
        for (ours, theirs) in list.items.iter().zip(&p.items) {
            assert_eq!(ours.raw().unwrap(), theirs, "item bytes differ from prost");
        }
    }

    let items: Vec<&object::Object> = list.items.iter().collect();
    let again = object::encode_list_protobuf(
        &list.list_gvk,
        &list.resource_version,
        &list.continue_token,
        list.remaining_item_count,
        &items,
    )
    .unwrap();
    let back = object::decode_list(again).expect("a re-encoded list decodes");
    assert_eq!(back, list, "list changed through encode_list_protobuf");
});
