//! [`ApiStatus`]: the API's error object (`meta.v1.Status`), in both encodings, as failed
//! requests and watch `ERROR` events carry it. Upstream: `apimachinery/pkg/apis/meta/v1/types.go`.

use bytes::Bytes;
use prost::Message;
use serde::Deserialize;

use super::DecodeError;
use super::encoding::MAGIC;
use super::json;
use super::meta::GroupVersionKind;
use super::protobuf::{decode_envelope, encode_envelope};
use crate::wire::meta as pb;

/// An API error (`meta.v1.Status`), as returned by failed requests and watch `ERROR` events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiStatus {
    /// HTTP status code, e.g. 410.
    pub code: i32,
    /// `Success` or `Failure`.
    pub status: String,
    /// Machine-readable reason, e.g. `Expired`, `Gone`, `TooManyRequests`, `Timeout`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// `details.causes[].reason`, e.g. `ResourceVersionTooLarge`.
    pub cause_reasons: Vec<String>,
    /// `details.retryAfterSeconds`, when the server asked the client to wait.
    pub retry_after_seconds: Option<i32>,
}

impl ApiStatus {
    fn from_pb(s: pb::Status) -> Self {
        let details = s.details.unwrap_or_default();
        ApiStatus {
            code: s.code.unwrap_or_default(),
            status: s.status.unwrap_or_default(),
            reason: s.reason.unwrap_or_default(),
            message: s.message.unwrap_or_default(),
            cause_reasons: details
                .causes
                .into_iter()
                .filter_map(|c| c.reason)
                .collect(),
            retry_after_seconds: details.retry_after_seconds,
        }
    }

    fn to_pb(&self) -> pb::Status {
        pb::Status {
            metadata: Some(pb::ListMeta::default()),
            status: Some(self.status.clone()),
            message: Some(self.message.clone()),
            reason: Some(self.reason.clone()),
            details: Some(pb::StatusDetails {
                causes: self
                    .cause_reasons
                    .iter()
                    .map(|r| pb::StatusCause {
                        reason: Some(r.clone()),
                        ..Default::default()
                    })
                    .collect(),
                retry_after_seconds: self.retry_after_seconds,
                ..Default::default()
            }),
            code: Some(self.code),
        }
    }

    /// Decodes a `Status` in either encoding (protobuf envelope or JSON).
    ///
    /// # Errors
    /// Any decode error of the format.
    pub fn decode(input: &Bytes) -> Result<Self, DecodeError> {
        if input.starts_with(&MAGIC) {
            let env = decode_envelope(input)?;
            Ok(Self::from_pb(pb::Status::decode(env.raw)?))
        } else {
            #[derive(Deserialize, Default)]
            #[serde(rename_all = "camelCase", default)]
            struct Cause {
                reason: Option<String>,
            }
            #[derive(Deserialize, Default)]
            #[serde(rename_all = "camelCase", default)]
            struct Details {
                #[serde(deserialize_with = "json::objects")]
                causes: Vec<Cause>,
                retry_after_seconds: Option<i32>,
            }
            #[derive(Deserialize, Default)]
            #[serde(rename_all = "camelCase", default)]
            struct S {
                code: i32,
                status: String,
                reason: String,
                message: String,
                #[serde(deserialize_with = "json::object")]
                details: Option<Details>,
            }
            let json::ObjectOnly(s): json::ObjectOnly<S> =
                serde_json::from_slice(input).map_err(|e| DecodeError::json(&e, 0))?;
            let d = s.details.unwrap_or_default();
            Ok(ApiStatus {
                code: s.code,
                status: s.status,
                reason: s.reason,
                message: s.message,
                cause_reasons: d.causes.into_iter().filter_map(|c| c.reason).collect(),
                retry_after_seconds: d.retry_after_seconds,
            })
        }
    }

    /// Encodes as a protobuf envelope (`v1` `Status`).
    pub fn encode_protobuf(&self) -> Bytes {
        encode_envelope(
            &GroupVersionKind::new("", "v1", "Status"),
            &self.to_pb().encode_to_vec(),
        )
    }

    /// Encodes as a JSON document.
    pub fn encode_json(&self) -> Bytes {
        let mut doc = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": self.status,
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        // As the API server writes it: `details` only when there is something in it, and no
        // nulls (clients such as kube-rs reject `"retryAfterSeconds": null`).
        let mut details = serde_json::Map::new();
        if !self.cause_reasons.is_empty() {
            details.insert(
                "causes".into(),
                self.cause_reasons
                    .iter()
                    .map(|r| serde_json::json!({"reason": r}))
                    .collect(),
            );
        }
        if let Some(s) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), s.into());
        }
        if !details.is_empty() {
            doc["details"] = details.into();
        }
        Bytes::from(doc.to_string())
    }
}
