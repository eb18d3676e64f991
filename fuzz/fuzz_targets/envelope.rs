//! The protobuf envelope (`k8s\0` + `runtime.Unknown`) and whole-object decode on arbitrary bytes.
//!
//! Invariants beyond "no panic":
//! - `decode_envelope`'s `raw` is a slice of the input; `decode` of the same input yields an
//!   object whose raw bytes are that same slice, or fails exactly when its metadata does;
//! - differential against prost's generated `runtime.Unknown`: whenever prost accepts the bytes
//!   after the magic, our decoder accepts them too (unless `raw` is absent, which we require, or
//!   an unknown field is a proto2 group, which we reject) and agrees on type meta and raw;
//! - `encode_envelope` of what was decoded decodes to the same kind and raw bytes.

#![no_main]

use bytes::Bytes;
use informer::object::{self, DecodeError, Encoding, GroupVersionKind, MAGIC};
use informer::wire::runtime::Unknown;
use informer_fuzz::is_slice_of;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let input = Bytes::copy_from_slice(data);
    let env = object::decode_envelope(&input);
    if let Ok(env) = &env {
        assert!(input.starts_with(&MAGIC));
        assert!(
            is_slice_of(&input, &env.raw),
            "envelope raw is not a slice of the input"
        );
        let again = object::decode_envelope(&object::encode_envelope(&env.gvk, &env.raw))
            .expect("a re-encoded envelope decodes");
        assert_eq!(again.gvk, env.gvk, "kind changed through encode_envelope");
        assert_eq!(again.raw, env.raw, "raw changed through encode_envelope");
    }

    match (object::decode(input.clone()), &env) {
        (Ok(obj), Ok(env)) => {
            assert_eq!(obj.encoding(), Encoding::Protobuf);
            assert_eq!(
                obj.raw().unwrap().as_ptr(),
                env.raw.as_ptr(),
                "object raw is not the envelope raw"
            );
            assert_eq!(obj.raw_len(), env.raw.len());
            assert_eq!(obj.gvk(), &env.gvk);
        }
        (Ok(obj), Err(_)) => {
            // Not an envelope: only a JSON document may decode.
            assert_eq!(obj.encoding(), Encoding::Json);
            assert!(!input.starts_with(&MAGIC));
        }
        (Err(_), _) => {}
    }

    if let Some(body) = data.strip_prefix(&MAGIC)
        && let Ok(u) = Unknown::decode(body)
    {
        match &env {
            Ok(env) => {
                let tm = u.type_meta.unwrap_or_default();
                let gvk = GroupVersionKind::from_api_version(
                    tm.api_version.as_deref().unwrap_or(""),
                    tm.kind.as_deref().unwrap_or(""),
                );
                assert_eq!(env.gvk, gvk, "type meta differs from prost");
                assert_eq!(Some(&env.raw), u.raw.as_ref(), "raw differs from prost");
                assert_eq!(env.content_encoding, u.content_encoding.unwrap_or_default());
                assert_eq!(env.content_type, u.content_type.unwrap_or_default());
            }
            Err(DecodeError::Missing { .. }) => assert!(u.raw.is_none()),
            Err(DecodeError::BadTag {
                wire_type: 3 | 4, ..
            }) => {}
            Err(e) => panic!("prost accepts the envelope, we reject it: {e:?}"),
        }
    }
});
