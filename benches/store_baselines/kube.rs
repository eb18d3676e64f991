//! kube-runtime's `reflector::store` (kube-runtime 5, `RwLock<AHashMap<ObjectRef<K>, Arc<K>>>`),
//! holding the workload as k8s-openapi Pods and filled offline through its `Writer` with the
//! watcher events a real reflector feeds it (`Init`, `InitApply` per object, `InitDone`, then
//! `Apply` per update; each `Apply` clones the object into a new `Arc`, as the store does).
//!
//! It has no indexes: the namespace query is what its users write, `state_filter` (a scan of
//! every object under the read lock).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube_runtime::reflector::{ObjectRef, store};
use kube_runtime::watcher::Event;

use super::{Candidate, ReadSide, Workload, WriteSide};

struct Reader {
    store: store::Store<Pod>,
    refs: Vec<ObjectRef<Pod>>,
    namespaces: Vec<String>,
}

impl ReadSide for Reader {
    fn get(&self, i: usize) -> bool {
        self.store.get(&self.refs[i]).is_some()
    }

    // kube-runtime's store has no borrowing read: `get` clones the `Arc`, the only way in.
    fn peek(&self, i: usize) -> usize {
        self.store.get(&self.refs[i]).map_or(0, |p| {
            p.metadata.resource_version.as_deref().map_or(0, str::len)
        })
    }

    fn by_namespace(&self, ns: usize) -> usize {
        let ns = self.namespaces[ns].as_str();
        self.store
            .state_filter(|p| p.metadata.namespace.as_deref() == Some(ns))
            .len()
    }
}

struct W {
    writer: store::Writer<Pod>,
    /// `Apply` events for the update cycle's keys.
    events: Vec<Event<Pod>>,
}

impl WriteSide for W {
    fn write(&mut self, w: &Workload, pos: usize, n: usize) {
        let u = self.events.len();
        for p in pos..pos + n {
            let _ = w;
            self.writer.apply_watcher_event(&self.events[p % u]);
        }
    }
}

/// A filled kube-runtime store and its writer.
pub fn filled(pods: &[Pod]) -> (store::Store<Pod>, store::Writer<Pod>) {
    let mut writer = store::Writer::<Pod>::default();
    writer.apply_watcher_event(&Event::Init);
    for p in pods {
        writer.apply_watcher_event(&Event::InitApply(p.clone()));
    }
    writer.apply_watcher_event(&Event::InitDone);
    (writer.as_reader(), writer)
}

/// The candidate's name in reports.
pub const NAME: &str = "kube-runtime reflector::store";

pub fn build(w: &Arc<Workload>) -> Candidate {
    assert!(
        !w.pods.is_empty(),
        "workload built without k8s-openapi pods"
    );
    let (store, writer) = filled(&w.pods);
    let events = w
        .updates
        .iter()
        .enumerate()
        .map(|(j, o)| {
            let mut p = w.pods[j * super::workload::UPDATE_STRIDE].clone();
            p.metadata.resource_version = Some(o.resource_version().to_owned());
            Event::Apply(p)
        })
        .collect();
    Candidate {
        name: NAME,
        reader: Arc::new(Reader {
            store,
            refs: w.pods.iter().map(ObjectRef::from_obj).collect(),
            namespaces: w.namespaces.clone(),
        }),
        writer: Box::new(W { writer, events }),
    }
}
