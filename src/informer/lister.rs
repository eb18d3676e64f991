//! [`Lister`] and [`NamespaceLister`]: reads of an informer's store the way generated
//! client-go listers offer them (`tools/cache/listers.go`, `ListAll`, `ListAllByNamespace`).

use std::sync::Arc;

use crate::object::LabelSelector;
use crate::object::{Object, ObjectKey};
use crate::store::{NAMESPACE_INDEX, Snapshot, Store};

/// Reads of an informer's objects: by namespace and name, all, or by label selector. Each
/// call reads one consistent [`Snapshot`] without locks; two calls may see two versions (take
/// a [`snapshot`](Self::snapshot) for reads that must agree). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Lister {
    store: Store,
}

impl Lister {
    /// A lister over `store`.
    pub fn new(store: Store) -> Self {
        Lister { store }
    }

    /// The store it reads.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// One consistent version of the store.
    pub fn snapshot(&self) -> Snapshot {
        self.store.snapshot()
    }

    /// The object `namespace/name` (`namespace` empty for cluster-scoped objects).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Object>> {
        self.store.get(&ObjectKey::new(namespace, name))
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<Object>> {
        self.store.list()
    }

    /// Every object whose labels match `selector`.
    pub fn list_matching(&self, selector: &LabelSelector) -> Vec<Arc<Object>> {
        let snap = self.store.snapshot();
        snap.iter()
            .filter(|(_, o)| selector.matches(o.meta().labels()))
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// A lister of one namespace (client-go `Pods(namespace)`).
    pub fn namespace(&self, namespace: &str) -> NamespaceLister {
        NamespaceLister {
            store: self.store.clone(),
            namespace: namespace.to_owned(),
        }
    }
}

/// Reads of one namespace; uses the store's `namespace` index when it has one, else filters.
#[derive(Clone, Debug)]
pub struct NamespaceLister {
    store: Store,
    namespace: String,
}

impl NamespaceLister {
    /// The namespace it reads.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The object `name` in this namespace.
    pub fn get(&self, name: &str) -> Option<Arc<Object>> {
        self.store.get(&ObjectKey::new(&self.namespace, name))
    }

    /// Every object of the namespace.
    pub fn list(&self) -> Vec<Arc<Object>> {
        let snap = self.store.snapshot();
        list_namespace(&snap, &self.namespace)
    }

    /// Every object of the namespace whose labels match `selector`.
    pub fn list_matching(&self, selector: &LabelSelector) -> Vec<Arc<Object>> {
        let mut objs = self.list();
        objs.retain(|o| selector.matches(o.meta().labels()));
        objs
    }
}

fn list_namespace(snap: &Snapshot, namespace: &str) -> Vec<Arc<Object>> {
    match snap.by_index(NAMESPACE_INDEX, namespace) {
        Ok(objs) => objs,
        // No namespace index configured: filter.
        Err(_) => snap
            .iter()
            .filter(|(_, o)| o.namespace() == namespace)
            .map(|(_, o)| o.clone())
            .collect(),
    }
}
