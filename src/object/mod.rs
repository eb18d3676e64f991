//! Kubernetes objects as they arrive on the wire: metadata decoded eagerly, the rest kept as
//! the input's own bytes (zero-copy `Bytes` slices) and decoded into a typed `k8s-pb` message
//! only when asked.
//!
//! Formats (upstream `apimachinery/pkg/runtime/serializer/protobuf` and `.../streaming`):
//! - protobuf envelope: magic `k8s\0` + `runtime.Unknown{typeMeta, raw}` ([`decode`]);
//! - protobuf watch streams: 4-byte big-endian length + `WatchEvent` ([`WatchDecoder`]);
//! - JSON objects, JSON watch streams (one event per line) and lists of both encodings.
//!
//! Every decoder returns a [`DecodeError`] for bad input; none panics, and none allocates from
//! a length read off the wire before checking it against the remaining input or a limit.

mod body;
mod codec;
mod compact;
mod dictionary;
mod encoding;
mod error;
mod json;
mod key;
mod list;
mod list_stream;
mod list_stream_json;
mod meta;
mod meta_encode;
mod meta_fields;
mod meta_pack;
mod meta_scalars;
mod meta_view;
mod partial;
mod protobuf;
mod protowire;
mod selector;
mod status;
mod tails;
mod text;
mod time;
mod value;
pub(crate) mod varint;
mod watch;

pub use codec::decode;
pub use compact::Compactor;
pub use dictionary::Dictionary;
pub use encoding::{Encoding, MAGIC};
pub use error::DecodeError;
pub(crate) use key::{KeyMap, KeySet};
pub use key::{ObjectKey, key_hash};
pub use list::{ObjectList, decode_list, encode_list_json, encode_list_protobuf};
pub use list_stream::ListStream;
pub use meta::{GroupVersionKind, ObjectMeta, parse_resource_version};
pub use meta_encode::encode_object_meta;
pub use meta_fields::{ObjectMetaFields, OwnerReference};
pub use meta_view::{Finalizers, OwnerRef, OwnerRefs, StrMapRef, StrMapRefIter};
pub use partial::{META_GROUP, PARTIAL_OBJECT_METADATA, PARTIAL_OBJECT_METADATA_LIST, partial_gvk};
pub use protobuf::{Envelope, decode_envelope, encode_envelope};
pub(crate) use selector::is_dns_subdomain;
#[cfg(feature = "sim")]
pub(crate) use selector::is_label_key;
pub(crate) use selector::is_label_value;
pub use selector::{LabelSelector, MAX_SELECTOR_LEN, SelectorError};
pub use status::ApiStatus;
pub use tails::{MetaTails, TAIL_LIMIT};
pub use text::{Str, StrMap, StrMapIter};
pub use time::Time;
pub use value::Object;
pub use watch::{
    DEFAULT_COMPACT_RATIO, DEFAULT_FRAME_LIMIT, FrameDecoder, LineDecoder, SHARED_BUFFER_SPAN,
    WatchDecoder, WatchEvent, WatchEventType, WatchFormat, encode_watch_frame, encode_watch_line,
};
pub(crate) use watch::{FrameCache, WatchFrame};
