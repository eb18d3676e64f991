//! Object templates: real objects from the shared fixtures, which the simulator stamps with fresh
//! metadata (everything but `metadata` keeps the fixture's bytes).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::SimError;
use super::variants::{DEPLOYMENT_REPLICAS, POD_STATES};
use crate::object::{self, DecodeError, Encoding, GroupVersionKind, MAGIC, Object};

/// The HEAD Pod round-trip fixture (every field of the schema set; about 13.5 KB).
pub const HEAD_POD: &str = "k8s-testdata/HEAD/core.v1.Pod.pb";
/// A real Pod as a 2017 API server stored it in etcd (about 1.5 KB, one stray trailing byte).
pub const ETCD_POD: &str = "real/auger-etcd-real-protobuf/storage__pod.bin";
/// Directory of seven real OpenShift Pods in JSON (8–33 KB each).
pub const OPENSHIFT_PODS: &str = "real/openshift-insights-real-objects/pods";
/// The HEAD Deployment round-trip fixture (every field of the schema set; about 12 KB).
pub const HEAD_DEPLOYMENT: &str = "k8s-testdata/HEAD/apps.v1.Deployment.pb";

/// Finds the shared fixtures directory: `$INFORMER_FIXTURES` if set, else `../shared/fixtures`
/// relative to this crate's manifest directory, else relative to the current directory (and
/// `shared/fixtures` below it).
///
/// # Errors
/// [`SimError::FixturesNotFound`] with every directory tried.
pub fn default_fixtures_dir() -> Result<PathBuf, SimError> {
    let mut tried = Vec::new();
    if let Some(dir) = std::env::var_os("INFORMER_FIXTURES") {
        tried.push(PathBuf::from(dir));
    }
    tried.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures"));
    if let Ok(cwd) = std::env::current_dir() {
        tried.push(cwd.join("../shared/fixtures"));
        tried.push(cwd.join("shared/fixtures"));
    }
    match tried.iter().find(|d| d.join(HEAD_POD).is_file()) {
        Some(d) => Ok(d.clone()),
        None => Err(SimError::FixturesNotFound { tried }),
    }
}

/// The objects new simulator objects are stamped from: one or more objects of one kind and one
/// encoding. The simulator serves that kind, in that encoding (protobuf templates: protobuf
/// lists and watch frames; JSON templates: JSON lists and watch lines, like a custom resource).
#[derive(Clone)]
pub struct Templates {
    objects: Arc<[Object]>,
}

impl Templates {
    /// Templates from decoded objects.
    ///
    /// # Errors
    /// [`SimError::NoTemplates`] for none; [`SimError::MixedTemplates`] when kinds or
    /// encodings differ; [`SimError::Encode`] when an object cannot be re-encoded.
    pub fn from_objects(objects: Vec<Object>) -> Result<Self, SimError> {
        let first = objects.first().ok_or(SimError::NoTemplates)?;
        let describe = |o: &Object| format!("{} ({:?})", o.gvk(), o.encoding());
        for o in &objects {
            if o.gvk().kind.is_empty() || o.gvk().version.is_empty() {
                return Err(SimError::NoKind(o.key()));
            }
            if o.gvk() != first.gvk() || o.encoding() != first.encoding() {
                return Err(SimError::MixedTemplates {
                    first: describe(first),
                    other: describe(o),
                });
            }
            // Fail now rather than in the middle of a flood.
            o.with_meta(o.meta().clone())?;
        }
        Ok(Templates {
            objects: objects.into(),
        })
    }

    /// Templates read from files: protobuf envelopes (`k8s\0` + Unknown; one stray trailing
    /// `0x0A`, as in the etcd dumps, is tolerated) or JSON documents.
    ///
    /// # Errors
    /// [`SimError::Io`], [`SimError::Template`], and those of [`Templates::from_objects`].
    pub fn from_files<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
    ) -> Result<Self, SimError> {
        Self::read_files(paths, None)
    }

    /// JSON (or protobuf) templates read from files; a JSON document without `apiVersion` and
    /// `kind` (as in dumps that strip them, e.g. the OpenShift Insights Pods) gets `gvk`'s, so
    /// that the objects served carry them as a real server's do.
    ///
    /// # Errors
    /// As [`Templates::from_files`].
    pub fn from_files_with_kind<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
        gvk: &GroupVersionKind,
    ) -> Result<Self, SimError> {
        Self::read_files(paths, Some(gvk))
    }

    fn read_files<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
        gvk: Option<&GroupVersionKind>,
    ) -> Result<Self, SimError> {
        let mut objects = Vec::new();
        for p in paths {
            let path = p.as_ref();
            let bytes = std::fs::read(path).map_err(|source| SimError::Io {
                path: path.to_owned(),
                source,
            })?;
            objects.push(decode_file(Bytes::from(bytes), gvk).map_err(|source| {
                SimError::Template {
                    path: path.to_owned(),
                    source,
                }
            })?);
        }
        Self::from_objects(objects)
    }

    /// The HEAD `core.v1.Pod` fixture ([`HEAD_POD`]) under `fixtures_dir`: protobuf, 13.5 KB.
    ///
    /// # Errors
    /// As [`Templates::from_files`].
    pub fn head_pod(fixtures_dir: &Path) -> Result<Self, SimError> {
        Self::from_files([fixtures_dir.join(HEAD_POD)])
    }

    /// The real etcd Pod ([`ETCD_POD`]) under `fixtures_dir`: protobuf, 1.5 KB.
    ///
    /// # Errors
    /// As [`Templates::from_files`].
    pub fn etcd_pod(fixtures_dir: &Path) -> Result<Self, SimError> {
        Self::from_files([fixtures_dir.join(ETCD_POD)])
    }

    /// Both protobuf Pods: [`HEAD_POD`] and [`ETCD_POD`].
    ///
    /// # Errors
    /// As [`Templates::from_files`].
    pub fn protobuf_pods(fixtures_dir: &Path) -> Result<Self, SimError> {
        Self::from_files([fixtures_dir.join(HEAD_POD), fixtures_dir.join(ETCD_POD)])
    }

    /// The seven real OpenShift Pods in JSON ([`OPENSHIFT_PODS`]), in file-name order.
    ///
    /// # Errors
    /// As [`Templates::from_files`]; [`SimError::Io`] when the directory cannot be read.
    pub fn openshift_json(fixtures_dir: &Path) -> Result<Self, SimError> {
        let dir = fixtures_dir.join(OPENSHIFT_PODS);
        let io = |source| SimError::Io {
            path: dir.clone(),
            source,
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let p = entry.map_err(io)?.path();
            if p.extension().is_some_and(|e| e == "json") {
                files.push(p);
            }
        }
        files.sort();
        Self::from_files_with_kind(files, &GroupVersionKind::new("", "v1", "Pod"))
    }

    /// Templates made from `base` by decoding it as the k8s-pb kind `K`, applying each of
    /// `edits` to a copy, and encoding the result in a protobuf envelope of `base`'s kind: one
    /// template per edit, in order. Errors: [`SimError::Encode`] when `base` does not decode
    /// as `K` or a variant does not decode back; those of [`Templates::from_objects`].
    fn typed_variants<K: prost::Message + Default + Clone>(
        base: &Object,
        edits: impl IntoIterator<Item = impl FnOnce(&mut K)>,
    ) -> Result<Self, SimError> {
        let typed: K = base.decode()?;
        let mut objects = Vec::new();
        for edit in edits {
            let mut v = typed.clone();
            edit(&mut v);
            let envelope = object::encode_envelope(base.gvk(), &v.encode_to_vec());
            objects.push(object::decode(envelope)?);
        }
        Self::from_objects(objects)
    }

    /// The HEAD `apps.v1.Deployment` fixture ([`HEAD_DEPLOYMENT`]) as one template per
    /// [`DEPLOYMENT_REPLICAS`] value of `spec.replicas`, made coherent: a valid selector (each
    /// simulated Deployment selects its own app's Pods), a `RollingUpdate` strategy, not
    /// paused, and a status of a finished rollout of generation 1; everything else as the
    /// fixture has it. Protobuf, about 12 KB each; the JSON twins are
    /// [`Templates::deployment_twins`]. A simulator of Deployments names its objects after their
    /// app (see [`SimServer`](super::SimServer#what-matches-a-real-api-server)); with
    /// [`SimConfig::update_template`](super::SimConfig::update_template) an update scales one.
    ///
    /// # Errors
    /// As [`Templates::from_files`]; [`SimError::Encode`] if the fixture does not decode as its
    /// kind.
    pub fn deployments(fixtures_dir: &Path) -> Result<Self, SimError> {
        let base = Self::from_files([fixtures_dir.join(HEAD_DEPLOYMENT)])?;
        Self::typed_variants(
            &base.objects[0],
            (0..DEPLOYMENT_REPLICAS.len()).map(|i| {
                move |d: &mut k8s_pb::api::apps::v1::Deployment| {
                    super::variants::deployment_pb(d, i)
                }
            }),
        )
    }

    /// The real etcd Pod ([`ETCD_POD`]) in the four [`POD_STATES`] of a Pod going from
    /// creation to ready: `status.phase` and `status.conditions` as listed, container statuses
    /// waiting (`ContainerCreating`) while Pending and running and ready once Running;
    /// everything else as stored in etcd. Protobuf, about 1.5 KB each; the JSON twins are
    /// [`Templates::pod_state_twins`]. With
    /// [`SimConfig::update_template`](super::SimConfig::update_template) an update moves a Pod
    /// to a random state (a flood of readiness changes, not a lifecycle).
    ///
    /// # Errors
    /// As [`Templates::from_files`]; [`SimError::Encode`] if the fixture does not decode as its
    /// kind.
    pub fn pod_states(fixtures_dir: &Path) -> Result<Self, SimError> {
        let base = Self::from_files([fixtures_dir.join(ETCD_POD)])?;
        Self::typed_variants(
            &base.objects[0],
            (0..POD_STATES.len()).map(|i| {
                move |p: &mut k8s_pb::api::core::v1::Pod| super::variants::pod_state_pb(p, i)
            }),
        )
    }

    /// The template objects.
    pub fn objects(&self) -> &[Object] {
        &self.objects
    }

    /// Number of templates (at least one).
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Always `false`: a `Templates` holds at least one object.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The kind every template has.
    pub fn gvk(&self) -> &Arc<GroupVersionKind> {
        self.objects[0].gvk_arc()
    }

    /// The encoding every template has (and the simulator serves).
    pub fn encoding(&self) -> Encoding {
        self.objects[0].encoding()
    }
}

impl fmt::Debug for Templates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Templates")
            .field("gvk", &self.gvk().to_string())
            .field("encoding", &self.encoding())
            .field(
                "sizes",
                &self.objects.iter().map(|o| o.raw_len()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Decodes a template file; a protobuf file that fails with one trailing `0x0A` byte is retried
/// without it (the etcd `storage__*.bin` dumps have one). A JSON document without a kind gets
/// `gvk`'s `apiVersion` and `kind` as its first members.
fn decode_file(bytes: Bytes, gvk: Option<&GroupVersionKind>) -> Result<Object, DecodeError> {
    let obj = match object::decode(bytes.clone()) {
        Ok(o) => Ok(o),
        Err(e) if bytes.starts_with(&MAGIC) && bytes.last() == Some(&0x0A) => {
            object::decode(bytes.slice(..bytes.len() - 1)).map_err(|_| e)
        }
        Err(e) => Err(e),
    }?;
    match gvk {
        Some(gvk) if obj.encoding() == Encoding::Json && obj.gvk().kind.is_empty() => {
            let doc: serde_json::Map<String, serde_json::Value> =
                serde_json::from_slice(&bytes).map_err(|e| DecodeError::json(&e, 0))?;
            let mut out = serde_json::Map::new();
            out.insert("apiVersion".into(), gvk.api_version().into());
            out.insert("kind".into(), gvk.kind.clone().into());
            out.extend(
                doc.into_iter()
                    .filter(|(k, _)| k != "apiVersion" && k != "kind"),
            );
            let bytes = serde_json::to_vec(&out).map_err(|e| DecodeError::json(&e, 0))?;
            object::decode(Bytes::from(bytes))
        }
        _ => Ok(obj),
    }
}

impl Templates {
    /// The JSON twins of [`Templates::deployments`], in order (the same objects in JSON: the
    /// server's `json_twins`, or the templates of a JSON simulator).
    ///
    /// # Errors
    /// [`SimError::Io`], [`SimError::Template`].
    pub fn deployment_twins(fixtures_dir: &Path) -> Result<Vec<Object>, SimError> {
        super::variants::json_variants(
            fixtures_dir,
            super::variants::HEAD_DEPLOYMENT_JSON,
            DEPLOYMENT_REPLICAS.len(),
            super::variants::deployment_json,
        )
    }

    /// The JSON twins of [`Templates::pod_states`], in order.
    ///
    /// # Errors
    /// [`SimError::Io`], [`SimError::Template`].
    pub fn pod_state_twins(fixtures_dir: &Path) -> Result<Vec<Object>, SimError> {
        super::variants::json_variants(
            fixtures_dir,
            super::variants::ETCD_POD_JSON,
            POD_STATES.len(),
            super::variants::pod_state_json,
        )
    }
}
