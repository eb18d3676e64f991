//! [`WatchEvent`] and its [`WatchEventType`]: one event of a watch stream. Upstream:
//! `apimachinery/pkg/apis/meta/v1/watch.go`, `apimachinery/pkg/watch/watch.go`.

use std::sync::Arc;

use bytes::Bytes;

use crate::object::encoding::Encoding;
use crate::object::meta::{GroupVersionKind, ObjectMeta};
use crate::object::meta_encode::encode_object_meta;
use crate::object::meta_fields::ObjectMetaFields;
use crate::object::protowire::put_bytes;
use crate::object::status::ApiStatus;
use crate::object::{DecodeError, Object};

/// The `type` of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchEventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
    /// `BOOKMARK`: only `metadata.resourceVersion` (and annotations) are meaningful.
    Bookmark,
    /// `ERROR`: the object is a `Status`.
    Error,
}

impl WatchEventType {
    /// The wire name, e.g. `ADDED`.
    pub fn as_str(self) -> &'static str {
        match self {
            WatchEventType::Added => "ADDED",
            WatchEventType::Modified => "MODIFIED",
            WatchEventType::Deleted => "DELETED",
            WatchEventType::Bookmark => "BOOKMARK",
            WatchEventType::Error => "ERROR",
        }
    }

    /// Parses a wire name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ADDED" => WatchEventType::Added,
            "MODIFIED" => WatchEventType::Modified,
            "DELETED" => WatchEventType::Deleted,
            "BOOKMARK" => WatchEventType::Bookmark,
            "ERROR" => WatchEventType::Error,
            _ => return None,
        })
    }
}

/// One decoded watch event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// The object was created (or is part of a streaming initial list).
    Added(Object),
    /// The object changed.
    Modified(Object),
    /// The object was deleted; this is its last state.
    Deleted(Object),
    /// A progress marker: only the object's resourceVersion and annotations are meaningful
    /// (`k8s.io/initial-events-end: "true"` ends a streaming initial list).
    Bookmark(Object),
    /// The server reported an error (e.g. 410 Gone) and will close the stream.
    Error(ApiStatus),
}

impl WatchEvent {
    /// The event's type.
    pub fn event_type(&self) -> WatchEventType {
        match self {
            WatchEvent::Added(_) => WatchEventType::Added,
            WatchEvent::Modified(_) => WatchEventType::Modified,
            WatchEvent::Deleted(_) => WatchEventType::Deleted,
            WatchEvent::Bookmark(_) => WatchEventType::Bookmark,
            WatchEvent::Error(_) => WatchEventType::Error,
        }
    }

    /// The object carried, `None` for errors.
    pub fn object(&self) -> Option<&Object> {
        match self {
            WatchEvent::Added(o)
            | WatchEvent::Modified(o)
            | WatchEvent::Deleted(o)
            | WatchEvent::Bookmark(o) => Some(o),
            WatchEvent::Error(_) => None,
        }
    }

    /// A bookmark at `resource_version` for objects of `gvk` in `encoding`; with
    /// `initial_events_end`, annotated `k8s.io/initial-events-end: "true"`.
    pub fn bookmark(
        gvk: Arc<GroupVersionKind>,
        resource_version: &str,
        initial_events_end: bool,
        encoding: Encoding,
    ) -> Self {
        let mut meta = ObjectMetaFields {
            resource_version: resource_version.into(),
            ..Default::default()
        };
        if initial_events_end {
            meta.annotations
                .insert("k8s.io/initial-events-end".into(), "true".into());
        }
        let meta = ObjectMeta::from(meta);
        let raw = match encoding {
            Encoding::Protobuf => {
                let mut m = Vec::new();
                encode_object_meta(&meta, &mut m);
                let mut out = Vec::with_capacity(m.len() + 4);
                put_bytes(&mut out, 1, &m);
                Bytes::from(out)
            }
            Encoding::Json => {
                let mut doc = serde_json::json!({
                    "kind": gvk.kind,
                    "apiVersion": gvk.api_version(),
                    "metadata": {"resourceVersion": resource_version},
                });
                if initial_events_end {
                    doc["metadata"]["annotations"] =
                        serde_json::json!({"k8s.io/initial-events-end": "true"});
                }
                Bytes::from(doc.to_string())
            }
        };
        WatchEvent::Bookmark(Object::from_parts(gvk, meta, raw, encoding))
    }

    /// The event of `event_type` carrying `object` (or, for `ERROR`, `status`).
    ///
    /// # Errors
    /// [`DecodeError::Missing`] at `offset` when the one the type needs is `None`.
    pub(super) fn from_parts(
        event_type: WatchEventType,
        object: Option<Object>,
        status: Option<ApiStatus>,
        offset: u64,
    ) -> Result<Self, DecodeError> {
        let missing = DecodeError::Missing {
            what: "watch event object",
            offset,
        };
        Ok(match event_type {
            WatchEventType::Error => WatchEvent::Error(status.ok_or(missing)?),
            t => {
                let o = object.ok_or(missing)?;
                match t {
                    WatchEventType::Added => WatchEvent::Added(o),
                    WatchEventType::Modified => WatchEvent::Modified(o),
                    WatchEventType::Deleted => WatchEvent::Deleted(o),
                    _ => WatchEvent::Bookmark(o),
                }
            }
        })
    }
}
