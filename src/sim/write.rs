//! Writes from clients, with a real API server's rules (upstream
//! `apiserver/pkg/registry/generic/registry/store.go` `Create`, `Update`, `Delete`, and the
//! kinds' strategies): create with `AlreadyExists`, updates with optimistic concurrency on
//! `metadata.resourceVersion`, the `status` subresource, deletes with preconditions. Every
//! write takes the next resourceVersion and produces the watch event a real server sends.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::SimError;
use super::config::SimConfig;
use super::rest::{Part, Rest, split};
use super::server::SimServer;
use super::state::{Rec, State};
use super::status::{self, MODIFIED, bad_request, conflict, invalid};
use super::validate::validate;
use crate::object::{
    ApiStatus, Object, ObjectKey, ObjectMeta, ObjectMetaFields, Str, Time, WatchEventType,
};
use crate::reflector::ApiError;

/// Which part of an object an update writes (upstream: the main resource's strategy keeps
/// `status`; the `status` subresource's keeps everything else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteTarget {
    /// The object (`PUT .../pods/NAME`): metadata and spec; `status` is kept for kinds with a
    /// status subresource.
    Main,
    /// The `status` subresource (`PUT .../pods/NAME/status`): `status` only (and labels and
    /// annotations, as upstream lets status writers change them).
    Status,
}

/// Preconditions of a delete (`DeleteOptions.preconditions`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The object's uid must be this.
    pub uid: Option<String>,
    /// The object's resourceVersion must be this.
    pub resource_version: Option<String>,
}

/// Characters of a generated name's suffix (upstream `utilrand.String`: no vowels, no
/// look-alikes).
const SUFFIX_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Now, as a Kubernetes timestamp (whole seconds, as servers write `creationTimestamp`).
fn now() -> Time {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Time {
        seconds: i64::try_from(secs).unwrap_or(i64::MAX),
        nanos: 0,
    }
}

/// A body that does not decode as its kind: 400, as a server's decoder answers.
fn undecodable(e: crate::object::DecodeError) -> ApiError {
    status_err(bad_request(format!(
        "the request body does not decode: {e}"
    )))
}

fn status_err(s: ApiStatus) -> ApiError {
    ApiError::Status(s)
}

fn sim_err(e: SimError) -> ApiError {
    status_err(status::failure(500, "InternalError", e.to_string()))
}

impl SimServer {
    /// The resource as error messages name it: `pods`, `deployments.apps`.
    fn qualified(&self) -> String {
        let g = &self.gvk().group;
        let plural = &self.config().resource;
        if g.is_empty() {
            plural.clone()
        } else {
            format!("{plural}.{g}")
        }
    }

    /// Checks that `obj` is of the served kind and encoding.
    fn check_kind(&self, obj: &Object) -> Result<(), ApiError> {
        let want = self.gvk();
        let got = obj.gvk();
        if !got.kind.is_empty() && got.kind != want.kind {
            return Err(status_err(bad_request(format!(
                "the kind in the data ({}) does not match the kind of the resource ({})",
                got.kind, want.kind
            ))));
        }
        if !got.version.is_empty() && (got.group != want.group || got.version != want.version) {
            return Err(status_err(bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({})",
                got.api_version(),
                want.api_version()
            ))));
        }
        if obj.encoding() != self.encoding() {
            return Err(status_err(status::failure(
                415,
                "UnsupportedMediaType",
                format!(
                    "this simulator stores {:?} objects; send the body as {:?}",
                    self.encoding(),
                    self.encoding()
                ),
            )));
        }
        Ok(())
    }

    /// Creates `obj` in `namespace` (POST to the collection), as a real server does: the name
    /// from `metadata.name` or `generateName` plus 5 random characters; a new uid,
    /// `creationTimestamp` (now), `generation` 1 and resourceVersion; `status` reset (a Pod's
    /// to phase Pending). Returns the object as stored (an ADDED event carries it).
    ///
    /// # Errors
    /// 409 AlreadyExists; 400 for a namespace other than the path's or another kind; 422
    /// without a name; 415 for a body in the other encoding.
    pub fn create_object(&self, namespace: &str, obj: &Object) -> Result<Arc<Object>, ApiError> {
        self.check_kind(obj)?;
        let (mut meta, mut rest) = split(obj).map_err(undecodable)?;
        let namespaced = !self.templates_cluster_scoped();
        if namespaced {
            if !meta.namespace.is_empty() && *meta.namespace != *namespace {
                return Err(status_err(bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                )));
            }
            meta.namespace = namespace.into();
        } else {
            meta.namespace = Str::default();
        }
        let qualified = self.qualified();
        let gvk = self.gvk().clone();
        let r = self.change(|st, cfg| {
            if meta.name.is_empty() {
                if meta.generate_name.is_empty() {
                    return Ok(Err(invalid(format!(
                        "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                        gvk.kind
                    ))));
                }
                let suffix: String = (0..5)
                    .map(|_| {
                        SUFFIX_CHARS[st.rng.below(SUFFIX_CHARS.len() as u64) as usize] as char
                    })
                    .collect();
                meta.name = format!("{}{suffix}", meta.generate_name).into();
            }
            let key = meta.key();
            if st.objects.contains_key(&key) {
                return Ok(Err(status::already_exists(&qualified, &meta.name)));
            }
            meta.uid = st.uids.uuid().into();
            meta.creation_timestamp = Some(now());
            meta.generation = Some(1);
            meta.deletion_timestamp = None;
            meta.deletion_grace_period_seconds = None;
            match (gvk.group.as_str(), gvk.kind.as_str()) {
                ("", "Pod") => rest.reset_status(Some("Pending")),
                ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
                    rest.reset_status(None);
                }
                ("", "Namespace") => {
                    // The namespace strategy's defaults.
                    meta.labels
                        .insert("kubernetes.io/metadata.name".into(), meta.name.clone());
                    rest.reset_status(Some("Active"));
                    rest.default_finalizers(&["kubernetes"]);
                }
                _ => {}
            }
            if let Err(s) = validate(&gvk, &meta, &rest, None) {
                return Ok(Err(s));
            }
            st.write(cfg, WatchEventType::Added, meta, &rest, 0, None)
                .map(Ok)
        });
        self.written(r)
    }

    /// Replaces `key` with `obj` (PUT), as a real server does: `metadata.resourceVersion`, when
    /// set, must be the current one (else 409 Conflict), as must `metadata.uid`; uid and
    /// `creationTimestamp` are kept, and for [`WriteTarget::Main`] the stored `status`, for
    /// [`WriteTarget::Status`] the stored spec, owner references and (apps kinds) labels;
    /// `generation` goes up by one when `spec` changed (for Deployments also annotations); the
    /// result is validated (422); an object being deleted whose last finalizer goes is deleted.
    /// Returns the object as stored (a MODIFIED or DELETED event carries it).
    ///
    /// # Errors
    /// 404 NotFound; 409 Conflict; 400 for a name or namespace other than the path's.
    pub fn replace_object(
        &self,
        key: &ObjectKey,
        obj: &Object,
        target: WriteTarget,
    ) -> Result<Arc<Object>, ApiError> {
        self.check_kind(obj)?;
        let (new_meta, new_rest) = split(obj).map_err(undecodable)?;
        if (!new_meta.name.is_empty() && *new_meta.name != *key.name())
            || (!new_meta.namespace.is_empty() && *new_meta.namespace != *key.namespace())
        {
            return Err(status_err(bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({})",
                new_meta.key(),
                key
            ))));
        }
        let qualified = self.qualified();
        let gvk = self.gvk().clone();
        let r = self.change(|st, cfg| {
            let Some(prev) = st.objects.get(key).cloned() else {
                return Ok(Err(status::not_found(&qualified, key.name())));
            };
            let old = prev.object()?;
            let (old_meta, old_rest) = split(&old)?;
            if !new_meta.resource_version.is_empty()
                && new_meta.resource_version != old_meta.resource_version
            {
                return Ok(Err(conflict(&qualified, key.name(), MODIFIED)));
            }
            if !new_meta.uid.is_empty() && new_meta.uid != old_meta.uid {
                return Ok(Err(conflict(
                    &qualified,
                    key.name(),
                    &format!(
                        "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                        new_meta.uid, old_meta.uid
                    ),
                )));
            }
            let (mut meta, rest) = match target {
                WriteTarget::Main => {
                    let mut rest = new_rest.clone();
                    rest.take(&old_rest, Part::Status);
                    (new_meta.clone(), rest)
                }
                WriteTarget::Status => {
                    let mut rest = old_rest.clone();
                    rest.take(&new_rest, Part::Status);
                    // A status writer may change annotations, and (but for Deployments) labels;
                    // never owner references (upstream's status strategies).
                    let mut meta = new_meta.clone();
                    meta.owner_references.clone_from(&old_meta.owner_references);
                    if gvk.group == "apps" {
                        meta.labels.clone_from(&old_meta.labels);
                    }
                    (meta, rest)
                }
            };
            keep_system_fields(&mut meta, &old_meta);
            let generation = old_meta.generation.unwrap_or(1);
            // Deployments also count annotation changes (they are copied to ReplicaSets).
            let annotations_count = gvk.group == "apps" && gvk.kind == "Deployment";
            let bump = !rest.same(&old_rest, Part::Spec)
                || (annotations_count
                    && target == WriteTarget::Main
                    && meta.annotations != old_meta.annotations);
            meta.generation = Some(if bump { generation + 1 } else { generation });
            if rest == old_rest && same_meta(&meta, &old_meta) {
                // A no-op update: no new resourceVersion, no event (as upstream).
                return Ok(Ok(prev));
            }
            if let Err(s) = validate(&gvk, &meta, &rest, Some(&old_rest)) {
                return Ok(Err(s));
            }
            if meta.deletion_timestamp.is_some() && meta.finalizers.is_empty() {
                // The last finalizer of an object being deleted is gone: it is deleted now.
                return st.delete(cfg, key).map(Ok);
            }
            st.write(
                cfg,
                WatchEventType::Modified,
                meta,
                &rest,
                prev.template,
                Some(prev),
            )
            .map(Ok)
        });
        self.written(r)
    }

    /// Deletes `key` (DELETE) after checking `pre`; returns the object as the DELETED event
    /// carries it. An object with finalizers is marked instead (`deletionTimestamp`, a MODIFIED
    /// event) and deleted by the update that removes its last finalizer; otherwise deletion is
    /// immediate (grace periods are not honoured, as with `--grace-period=0 --force`).
    ///
    /// # Errors
    /// 404 NotFound; 409 Conflict when a precondition does not hold.
    pub fn delete_object(
        &self,
        key: &ObjectKey,
        pre: &Preconditions,
    ) -> Result<Arc<Object>, ApiError> {
        let qualified = self.qualified();
        let r = self.change(|st, cfg| {
            let Some(prev) = st.objects.get(key).cloned() else {
                return Ok(Err(status::not_found(&qualified, key.name())));
            };
            let old = prev.object()?;
            if let Some(uid) = pre.uid.as_deref().filter(|u| *u != old.uid()) {
                return Ok(Err(conflict(
                    &qualified,
                    key.name(),
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        old.uid()
                    ),
                )));
            }
            if let Some(rv) = pre
                .resource_version
                .as_deref()
                .filter(|rv| *rv != old.resource_version())
            {
                return Ok(Err(conflict(
                    &qualified,
                    key.name(),
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        old.resource_version()
                    ),
                )));
            }
            if !old.meta().finalizers().is_empty() {
                // Finalizers hold the object: it is marked for deletion (once) and stays until
                // an update removes the last one.
                if old.meta().deletion_timestamp().is_some() {
                    return Ok(Ok(prev));
                }
                let (mut meta, rest) = split(&old)?;
                meta.deletion_timestamp = Some(now());
                meta.deletion_grace_period_seconds = Some(0);
                meta.resource_version = Str::default();
                return st
                    .write(cfg, WatchEventType::Modified, meta, &rest, prev.template, Some(prev))
                    .map(Ok);
            }
            st.delete(cfg, key).map(Ok)
        });
        self.written(r)
    }

    /// Whether the templates are cluster-scoped (no namespace).
    fn templates_cluster_scoped(&self) -> bool {
        self.config()
            .templates
            .objects()
            .iter()
            .all(|o| o.namespace().is_empty())
    }

    fn written(
        &self,
        r: Result<Result<Arc<Rec>, ApiStatus>, SimError>,
    ) -> Result<Arc<Object>, ApiError> {
        match r {
            Ok(Ok(rec)) => rec.object().map_err(ApiError::from),
            Ok(Err(s)) => Err(status_err(s)),
            Err(e) => Err(sim_err(e)),
        }
    }
}

/// Fields only the server sets: kept from the stored object whatever the client sent.
fn keep_system_fields(meta: &mut ObjectMetaFields, old: &ObjectMetaFields) {
    meta.name.clone_from(&old.name);
    meta.namespace.clone_from(&old.namespace);
    meta.uid.clone_from(&old.uid);
    meta.creation_timestamp.clone_from(&old.creation_timestamp);
    meta.deletion_timestamp.clone_from(&old.deletion_timestamp);
    meta.deletion_grace_period_seconds = old.deletion_grace_period_seconds;
    if meta.generate_name.is_empty() {
        meta.generate_name.clone_from(&old.generate_name);
    }
    meta.resource_version = Str::default();
}

/// Whether two metadata are equal but for resourceVersion and generation.
fn same_meta(a: &ObjectMetaFields, b: &ObjectMetaFields) -> bool {
    let strip = |m: &ObjectMetaFields| {
        let mut m = m.clone();
        m.resource_version = Str::default();
        m.generation = None;
        m
    };
    strip(a) == strip(b)
}

impl State {
    /// Stores a client's version of an object (`meta` and `rest`, of template `template` for
    /// the codec's bookkeeping) and records the change.
    pub(super) fn write(
        &mut self,
        cfg: &SimConfig,
        kind: WatchEventType,
        meta: ObjectMetaFields,
        rest: &Rest,
        template: usize,
        prev: Option<Arc<Rec>>,
    ) -> Result<Arc<Rec>, SimError> {
        let meta = ObjectMeta::from(meta);
        let key = meta.key();
        let static_meta = self.codec.static_meta(&meta)?;
        let (labels, version) = self.codec.labels(meta.labels());
        let rec = Rec {
            template,
            rest: Some(rest.encode()?),
            vary_seed: prev.as_ref().map_or((0, 0), |p| p.vary_seed),
            static_meta,
            labels,
            version,
            generation: meta.generation().unwrap_or(1),
            wire: Bytes::new(),
            obj: OnceLock::new(),
        };
        self.commit(cfg, kind, key, rec, prev)
    }
}
