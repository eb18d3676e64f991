//! Writes: create (POST), update (PUT), patch (PATCH), delete (DELETE), on objects and their
//! `status` and `scale` subresources (upstream `apiserver/pkg/endpoints/handlers/create.go`,
//! `update.go`, `patch.go`, `delete.go`). The rules are the simulator's
//! ([`SimServer::create_object`] and the others); this layer decodes bodies, applies patches
//! and presents the `Scale` of Deployments.
//!
//! [`SimServer::create_object`]: crate::sim::SimServer::create_object

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde_json::{Value, json};

use super::api::Api;
use super::patch::{self, PatchType};
use super::proto_json;
use super::request::Target;
use super::response::{ResponseBody, api_error_response, error_response, json_response};
use crate::object::{self, Encoding, Object, ObjectKey, encode_envelope};
use crate::reflector::ApiError;
use crate::sim::status::{bad_request, failure, invalid};
use crate::sim::{Preconditions, Rest, WriteTarget, validate};

/// Largest request body accepted (kube-apiserver's limit for a write is about 3 MB).
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;

/// Tries of a patch that lost a race with another writer before it answers 409 (upstream
/// retries a patch on conflicts the same way).
const PATCH_TRIES: usize = 5;

fn status(s: crate::object::ApiStatus) -> ApiError {
    ApiError::Status(s)
}

impl Api {
    /// Answers a write to `target` (a collection for POST, an object or its subresource
    /// otherwise).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn write(
        &self,
        method: &Method,
        target: &Target<'_>,
        query: &[(String, String)],
        body: &Bytes,
        content_type: Option<&str>,
        enc: Encoding,
        meta_only: bool,
    ) -> Response<ResponseBody> {
        if query.iter().any(|(k, v)| k == "dryRun" && !v.is_empty()) {
            return error_response(&bad_request("dryRun is not supported by this server"), enc);
        }
        let namespace = target.namespace.unwrap_or("");
        let r = match (method.as_str(), target.name, target.sub) {
            ("POST", None, None) => {
                if self.resource.namespaced && target.namespace.is_none() {
                    return method_not_allowed(method, enc);
                }
                // The NamespaceLifecycle admission plugin's rule.
                if let (Some(ns), Some(sim)) = (target.namespace, &self.namespaces)
                    && sim.get(&ObjectKey::new("", ns)).is_none()
                {
                    return error_response(
                        &failure(404, "NotFound", format!("namespaces \"{ns}\" not found")),
                        enc,
                    );
                }
                self.decode_body(body, content_type)
                    .and_then(|o| {
                        self.check_protobuf(&o, None, WriteTarget::Main)?;
                        self.sim.create_object(namespace, &o)
                    })
                    .map(|o| (StatusCode::CREATED, o))
            }
            ("PUT", Some(name), None | Some("status")) => {
                let key = ObjectKey::new(namespace, name);
                let part = if target.sub.is_some() {
                    WriteTarget::Status
                } else {
                    WriteTarget::Main
                };
                self.decode_body(body, content_type)
                    .and_then(|o| {
                        self.check_protobuf(&o, Some(&key), part)?;
                        self.sim.replace_object(&key, &o, part)
                    })
                    .map(|o| (StatusCode::OK, o))
            }
            ("PATCH", Some(name), None | Some("status")) => {
                let key = ObjectKey::new(namespace, name);
                let part = if target.sub.is_some() {
                    WriteTarget::Status
                } else {
                    WriteTarget::Main
                };
                self.patch(&key, part, body, content_type)
                    .map(|o| (StatusCode::OK, o))
            }
            ("DELETE", Some(name @ ("default" | "kube-system" | "kube-public")), None)
                if self.resource.group.is_empty() && self.resource.plural == "namespaces" =>
            {
                return error_response(
                    &failure(
                        403,
                        "Forbidden",
                        format!(
                            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
                        ),
                    ),
                    enc,
                );
            }
            ("DELETE", Some(name), None) => {
                let key = ObjectKey::new(namespace, name);
                delete_options(body)
                    .and_then(|pre| self.sim.delete_object(&key, &pre))
                    .map(|o| (StatusCode::OK, o))
            }
            ("PUT" | "PATCH", Some(name), Some("scale")) if self.scalable() => {
                let key = ObjectKey::new(namespace, name);
                return match self.write_scale(method, &key, body, content_type) {
                    Ok(doc) => json_response(StatusCode::OK, &doc),
                    Err(e) => api_error_response(e, Encoding::Json),
                };
            }
            _ => return method_not_allowed(method, enc),
        };
        match r {
            Ok((code, obj)) => self.object_response(code, &obj, enc, meta_only),
            Err(e) => api_error_response(e, enc),
        }
    }

    /// A request body as an object this simulator can store: JSON for a JSON simulator;
    /// protobuf, or JSON whose members but metadata are a template's, for a protobuf one.
    fn decode_body(&self, body: &Bytes, content_type: Option<&str>) -> Result<Object, ApiError> {
        // No Content-Type: the body says what it is (protobuf's magic, or JSON).
        let ct = content_type.map(|c| c.split(';').next().unwrap_or("").trim());
        if !matches!(
            ct,
            None | Some("application/json" | "application/vnd.kubernetes.protobuf" | "*/*")
        ) {
            return Err(status(failure(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json, application/vnd.kubernetes.protobuf (got {:?})",
                    ct.unwrap_or("")
                ),
            )));
        }
        let obj = object::decode(body.clone()).map_err(|e| {
            status(bad_request(format!(
                "the request body does not decode: {e}"
            )))
        })?;
        self.stored_form(obj)
    }

    /// `obj` in the simulator's encoding: a JSON object whose fields but metadata are a
    /// template's keeps the template's bytes; anything else is converted by the Kubernetes
    /// schema ([`proto_json`]). A JSON body without `apiVersion` or `kind` is of the served
    /// kind (as a real server's decoder defaults them); another kind is left for the
    /// simulator's 400.
    fn stored_form(&self, obj: Object) -> Result<Object, ApiError> {
        let served = self.sim.gvk();
        match (self.sim.encoding(), obj.encoding()) {
            (a, b) if a == b => Ok(obj),
            (Encoding::Protobuf, _) => {
                let gvk = obj.gvk();
                if !gvk.kind.is_empty() && !gvk.version.is_empty() && gvk != &**served {
                    return Ok(obj);
                }
                if let Some(Ok(o)) = self.json.as_ref().map(|t| t.to_protobuf(&obj)) {
                    return Ok(o);
                }
                proto_json::object_to_protobuf(&obj, served).map_err(convert_error)
            }
            (Encoding::Json, _) => {
                let gvk = obj.gvk();
                let gvk = if gvk.kind.is_empty() && gvk.version.is_empty() {
                    &**served
                } else if gvk != &**served {
                    return Ok(obj);
                } else {
                    gvk
                };
                let doc = proto_json::object_to_json_as(&obj, gvk).map_err(convert_error)?;
                object::decode(doc).map_err(|e| convert_error(e.into()))
            }
        }
    }

    /// For a protobuf simulator: the checks a JSON simulator makes on a JSON body, on the
    /// object's JSON form (so a body the schema cannot read is a 400 here, never an object no
    /// JSON client can read), and for a create or an update of the object the typed shape and
    /// the kind's rules ([`crate::sim::validate`]; `old`: the stored object of an update).
    fn check_protobuf(
        &self,
        obj: &Object,
        old: Option<&ObjectKey>,
        part: WriteTarget,
    ) -> Result<(), ApiError> {
        if self.sim.encoding() != Encoding::Protobuf
            || proto_json::message_for(self.sim.gvk()).is_none()
            || obj.gvk() != &**self.sim.gvk()
        {
            return Ok(());
        }
        let members = |o: &Object| -> Result<serde_json::Map<String, Value>, ApiError> {
            let doc = proto_json::object_to_json(o).map_err(convert_error)?;
            let mut m: serde_json::Map<String, Value> = serde_json::from_slice(&doc)
                .map_err(|e| status(failure(500, "InternalError", e.to_string())))?;
            for k in ["apiVersion", "kind", "metadata"] {
                m.remove(k);
            }
            Ok(m)
        };
        let rest = Rest::Json(members(obj)?);
        if part == WriteTarget::Status {
            return Ok(());
        }
        let old = match old.and_then(|k| self.sim.get(k)) {
            Some(o) => Some(Rest::Json(members(&o)?)),
            None => None,
        };
        validate(self.sim.gvk(), &obj.meta().to_fields(), &rest, old.as_ref()).map_err(status)
    }

    /// The object at `key` as a JSON document.
    fn current_json(&self, key: &ObjectKey) -> Result<(Object, Value), ApiError> {
        let Some(cur) = self.sim.get(key) else {
            return Err(status(failure(
                404,
                "NotFound",
                format!("{} \"{}\" not found", self.qualified(), key.name()),
            )));
        };
        let doc = serde_json::from_slice(&self.object_json(&cur)?)
            .map_err(|e| status(failure(500, "InternalError", e.to_string())))?;
        Ok((Object::clone(&cur), doc))
    }

    fn qualified(&self) -> String {
        if self.resource.group.is_empty() {
            self.resource.plural.clone()
        } else {
            format!("{}.{}", self.resource.plural, self.resource.group)
        }
    }

    /// PATCH: the patch applied to the current JSON document, stored as an update; retried
    /// when another write came in between, unless the patch itself names a resourceVersion.
    fn patch(
        &self,
        key: &ObjectKey,
        part: WriteTarget,
        body: &Bytes,
        content_type: Option<&str>,
    ) -> Result<std::sync::Arc<Object>, ApiError> {
        let t = patch_type(content_type)?;
        let pinned = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|p| p.pointer("/metadata/resourceVersion").cloned())
            .is_some();
        let mut tries = 0;
        loop {
            tries += 1;
            let (_, doc) = self.current_json(key)?;
            let patched = patch::apply(t, &doc, body).map_err(patch_error)?;
            let obj = self.patched_object(&patched)?;
            self.check_protobuf(&obj, Some(key), part)?;
            match self.sim.replace_object(key, &obj, part) {
                Err(ApiError::Status(s)) if s.code == 409 && !pinned && tries < PATCH_TRIES => {}
                r => return r,
            }
        }
    }

    /// A patched JSON document as an object to store.
    fn patched_object(&self, doc: &Value) -> Result<Object, ApiError> {
        let bytes = serde_json::to_vec(doc)
            .map_err(|e| status(failure(500, "InternalError", e.to_string())))?;
        let obj = object::decode(Bytes::from(bytes))
            .map_err(|e| status(invalid(format!("the patched object is not valid: {e}"))))?;
        // The patch applied; what it made does not fit the kind: 422, as upstream answers.
        self.stored_form(obj).map_err(|e| match e {
            ApiError::Status(s) if s.code == 400 => status(invalid(format!(
                "the patched object is not valid: {}",
                s.message
                    .trim_start_matches("the request body does not decode: ")
            ))),
            e => e,
        })
    }

    /// The `autoscaling/v1` `Scale` of the object at `key`.
    pub(super) fn scale_doc(&self, key: &ObjectKey) -> Result<Value, ApiError> {
        let (obj, doc) = self.current_json(key)?;
        let selector = doc
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        let mut meta = json!({
            "name": obj.name(),
            "uid": obj.uid(),
            "resourceVersion": obj.resource_version(),
        });
        if !obj.namespace().is_empty() {
            meta["namespace"] = obj.namespace().into();
        }
        if let Some(t) = &obj.meta().creation_timestamp() {
            meta["creationTimestamp"] = t.to_rfc3339().into();
        }
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": meta,
            "spec": {"replicas": doc.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)},
            "status": {
                "replicas": doc.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
                "selector": selector,
            },
        }))
    }

    /// PUT or PATCH of `scale`: sets `spec.replicas` (a `metadata.resourceVersion` in the
    /// `Scale` is a precondition on the object's); answers the new `Scale`.
    fn write_scale(
        &self,
        method: &Method,
        key: &ObjectKey,
        body: &Bytes,
        content_type: Option<&str>,
    ) -> Result<Value, ApiError> {
        let current = self.scale_doc(key)?;
        let scale = if *method == Method::PATCH {
            let t = patch_type(content_type)?;
            patch::apply(t, &current, body).map_err(patch_error)?
        } else {
            serde_json::from_slice(body).map_err(|e| {
                status(bad_request(format!(
                    "the request body does not decode: {e}"
                )))
            })?
        };
        let Some(replicas) = scale.pointer("/spec/replicas").and_then(Value::as_i64) else {
            return Err(status(invalid(
                "Scale.autoscaling \"\" is invalid: spec.replicas: Required value",
            )));
        };
        if replicas < 0 {
            return Err(status(invalid(format!(
                "Scale.autoscaling \"{}\" is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0",
                key.name()
            ))));
        }
        let rv = scale
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty())
            .map(str::to_owned);
        let obj = self.with_replicas(key, replicas, rv)?;
        self.sim.replace_object(key, &obj, WriteTarget::Main)?;
        self.scale_doc(key)
    }

    /// The object at `key` with `spec.replicas` set, carrying `rv` (or its own) as the
    /// update's precondition.
    fn with_replicas(
        &self,
        key: &ObjectKey,
        replicas: i64,
        rv: Option<String>,
    ) -> Result<Object, ApiError> {
        let (cur, mut doc) = self.current_json(key)?;
        if self.sim.encoding() == Encoding::Json {
            doc["spec"]["replicas"] = replicas.into();
            if let Some(rv) = rv {
                doc["metadata"]["resourceVersion"] = rv.into();
            }
            return self.patched_object(&doc);
        }
        // Protobuf: set the field in the typed object.
        use prost::Message as _;
        let decode_err =
            |e: crate::object::DecodeError| status(failure(500, "InternalError", e.to_string()));
        let mut d: k8s_pb::api::apps::v1::Deployment = cur.decode().map_err(decode_err)?;
        d.spec.get_or_insert_with(Default::default).replicas =
            Some(i32::try_from(replicas).unwrap_or(i32::MAX));
        let raw = d.encode_to_vec();
        let obj = object::decode(encode_envelope(cur.gvk(), &raw)).map_err(decode_err)?;
        let mut meta = obj.meta().to_fields();
        if let Some(rv) = rv {
            meta.resource_version = rv.into();
        }
        obj.with_meta(meta.into()).map_err(decode_err)
    }
}

/// A patch that was not applied: 400 for a malformed one, 422 for one that does not apply.
fn patch_error(e: patch::PatchError) -> ApiError {
    match e {
        patch::PatchError::Malformed(m) => status(bad_request(m)),
        patch::PatchError::Failed(m) => status(invalid(m)),
    }
}

fn patch_type(content_type: Option<&str>) -> Result<PatchType, ApiError> {
    let ct = content_type.unwrap_or("");
    PatchType::of(ct).ok_or_else(|| {
        status(failure(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {ct:?}; server-side apply is not supported)"
            ),
        ))
    })
}

/// The preconditions of a DELETE's `DeleteOptions` body (empty body: none).
fn delete_options(body: &Bytes) -> Result<Preconditions, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Preconditions::default());
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| status(bad_request(format!("DeleteOptions do not decode: {e}"))))?;
    let get = |k: &str| {
        v.pointer(&format!("/preconditions/{k}"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    Ok(Preconditions {
        uid: get("uid"),
        resource_version: get("resourceVersion"),
    })
}

fn method_not_allowed(method: &Method, enc: Encoding) -> Response<ResponseBody> {
    error_response(
        &failure(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        ),
        enc,
    )
}

/// A body that could not be converted to the stored encoding: 415 for a kind the schema does
/// not know, else 400 (the body does not decode as its kind, as a real server's decoder says).
fn convert_error(e: proto_json::ConvertError) -> ApiError {
    match e {
        proto_json::ConvertError::UnknownKind(_) => status(failure(
            415,
            "UnsupportedMediaType",
            format!("{e}: send the body in the encoding this server keeps"),
        )),
        e => status(bad_request(format!(
            "the request body does not decode: {e}"
        ))),
    }
}
