//! The JSON list decoder (`decode_list` on a document with `metadata` and `items`) on arbitrary
//! bytes.
//!
//! Invariants beyond "no panic":
//! - every item's raw bytes are a slice of the input, and a JSON object;
//! - `encode_list_json` of what was decoded decodes to an equal list (same kind, list metadata
//!   and items, byte for byte);
//! - `ListStream`, fed the input in chunks cut where its first bytes say, never returns a
//!   list `decode_list` does not return.

#![no_main]

use bytes::Bytes;
use informer::object::{self, Encoding, MAGIC};
use informer_fuzz::{assert_raw_in, assert_stream_agrees};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let input = Bytes::copy_from_slice(data);
    let whole = object::decode_list(input.clone());
    assert_stream_agrees(&input, &whole);
    let Ok(list) = whole else {
        return;
    };
    if input.starts_with(&MAGIC) {
        return; // a protobuf list: the list_protobuf target's business
    }
    for item in &list.items {
        assert_eq!(item.encoding(), Encoding::Json);
        assert_raw_in(&input, item);
        assert_eq!(
            item.raw()
                .unwrap()
                .iter()
                .find(|b| !b.is_ascii_whitespace()),
            Some(&b'{'),
            "a list item that is not a JSON object was accepted"
        );
    }
    let items: Vec<&object::Object> = list.items.iter().collect();
    let again = object::encode_list_json(
        &list.list_gvk,
        &list.resource_version,
        &list.continue_token,
        list.remaining_item_count,
        &items,
    )
    .expect("a decoded JSON list re-encodes");
    let back = object::decode_list(again).expect("a re-encoded list decodes");
    assert_eq!(back, list, "list changed through encode_list_json");
});
