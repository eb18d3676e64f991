//! The bench workload: the real Pod an API server stored in etcd (fixture
//! `real/auger-etcd-real-protobuf/storage__pod.bin`, 1.6 KB protobuf; a Job's pod with two labels
//! and one owner reference) re-keyed to N objects: new name, namespace, UID, labels and owner
//! per object, everything else the fixture's own bytes (re-encoded by `Object::with_meta`).
//!
//! Layout: 100 objects per namespace, 10 per owning Job (labels `job-name`, `controller-uid`
//! and the owner reference name that Job). Updates: every 10th object gets a second version
//! (new resourceVersion, same labels); the update cycle alternates each key between its two
//! versions, so a flood frees no object and measures the store, not the allocator.

use std::path::Path;
use std::sync::Arc;

use informer::object::ObjectMeta;
use informer::object::{Object, ObjectKey};
use informer::sim::Templates;
use k8s_openapi::api::core::v1::Pod;

/// Objects per namespace.
pub const PER_NAMESPACE: usize = 100;
/// Objects per owning Job.
pub const PER_OWNER: usize = 10;
/// One object in this many has an update.
pub const UPDATE_STRIDE: usize = 10;

/// The workload.
pub struct Workload {
    /// N objects, the first version of each.
    pub objects: Vec<Arc<Object>>,
    /// Their keys.
    pub keys: Vec<ObjectKey>,
    /// Namespace names.
    pub namespaces: Vec<String>,
    /// Second versions of objects `0, UPDATE_STRIDE, 2 * UPDATE_STRIDE, ...`.
    pub updates: Vec<Arc<Object>>,
    /// The same N objects as k8s-openapi Pods (kube-runtime's store type), built only when
    /// asked for.
    pub pods: Vec<Pod>,
}

fn fixtures() -> std::path::PathBuf {
    informer::sim::default_fixtures_dir().unwrap_or_else(|e| panic!("fixtures: {e}"))
}

fn uid(i: usize, kind: u32) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-8000-{:012x}",
        i as u32,
        kind,
        i % 4096,
        (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16
    )
}

fn name(i: usize) -> String {
    format!(
        "job-{}-{:05x}",
        i / PER_OWNER,
        (i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D) >> 44
    )
}

impl Workload {
    /// Builds `n` objects (and their k8s-openapi twins when `pods`).
    pub fn new(n: usize, pods: bool) -> Workload {
        Self::build(n, pods, true)
    }

    /// Only the `n` objects (no keys, updates or pods): what a relist decodes.
    pub fn objects(n: usize) -> Vec<Arc<Object>> {
        Self::build(n, false, false).objects
    }

    fn build(n: usize, pods: bool, extras: bool) -> Workload {
        let dir = fixtures();
        let templates = Templates::etcd_pod(&dir).expect("etcd pod fixture");
        let template = &templates.objects()[0];
        let mut objects = Vec::with_capacity(n);
        let mut keys = Vec::with_capacity(if extras { n } else { 0 });
        let mut updates = Vec::with_capacity(if extras { n / UPDATE_STRIDE + 1 } else { 0 });
        for i in 0..n {
            let mut meta = template.meta().to_fields();
            meta.name = name(i).into();
            meta.generate_name = format!("job-{}-", i / PER_OWNER).into();
            meta.namespace = format!("ns-{}", i / PER_NAMESPACE).into();
            meta.uid = uid(i, 0).into();
            meta.resource_version = (1000 + i).to_string().into();
            let owner = uid(i / PER_OWNER, 1);
            meta.labels
                .insert("controller-uid".into(), owner.clone().into());
            meta.labels
                .insert("job-name".into(), format!("job-{}", i / PER_OWNER).into());
            for o in &mut meta.owner_references {
                o.uid = owner.clone().into();
                o.name = format!("job-{}", i / PER_OWNER).into();
            }
            let obj = template
                .with_meta(ObjectMeta::from(meta.clone()))
                .expect("re-key");
            if extras {
                keys.push(obj.key());
            }
            if extras && i % UPDATE_STRIDE == 0 {
                meta.resource_version = (10_000_000 + i).to_string().into();
                updates.push(Arc::new(
                    template.with_meta(ObjectMeta::from(meta)).expect("re-key"),
                ));
            }
            objects.push(Arc::new(obj));
        }
        let namespaces = (0..n.div_ceil(PER_NAMESPACE))
            .map(|i| format!("ns-{i}"))
            .collect();
        let pods = if pods {
            let json =
                std::fs::read(Path::new(&dir).join("real/auger-etcd-real-protobuf/json__pod.json"))
                    .expect("etcd pod json");
            let template: Pod = serde_json::from_slice(&json).expect("k8s-openapi Pod");
            objects
                .iter()
                .map(|o| {
                    let mut p = template.clone();
                    let m = &mut p.metadata;
                    m.name = Some(o.name().to_owned());
                    m.namespace = Some(o.namespace().to_owned());
                    m.uid = Some(o.uid().to_owned());
                    m.resource_version = Some(o.resource_version().to_owned());
                    m.labels = Some(
                        o.meta()
                            .labels()
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                    );
                    p
                })
                .collect()
        } else {
            Vec::new()
        };
        Workload {
            objects,
            keys,
            namespaces,
            updates,
            pods,
        }
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Position `pos` of the update cycle: (object number, version to write).
    pub fn update(&self, pos: usize) -> (usize, &Arc<Object>) {
        let u = self.updates.len();
        let j = pos % u;
        let i = j * UPDATE_STRIDE;
        if (pos / u).is_multiple_of(2) {
            (i, &self.updates[j])
        } else {
            (i, &self.objects[i])
        }
    }
}
