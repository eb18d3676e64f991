//! A `WorkQueue<ObjectKey>` as an informer's event handler: every notification enqueues its
//! object's key, the usual first step of a client-go controller (`cache.MetaNamespaceKeyFunc`
//! and `DeletionHandlingMetaNamespaceKeyFunc` into `queue.Add` in each handler function).

use std::sync::Arc;

use super::WorkQueue;
use crate::distributor::EventHandler;
use crate::fifo::DeltaObject;
use crate::object::{Object, ObjectKey};

/// Adds, updates (resyncs included) and deletes (tombstones included) all enqueue the key; the
/// queue's dedup merges a key that changes again before a worker gets it.
///
/// # Examples
/// ```
/// use informer::{HandlerOptions, Informer, InformerConfig, ObjectKey, WorkQueue};
/// # use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
/// # let sim = SimServer::new(SimConfig::new(Templates::etcd_pod(&default_fixtures_dir().unwrap()).unwrap())).unwrap();
/// let informer = Informer::new(sim, InformerConfig::default());
/// let queue = WorkQueue::<ObjectKey>::builder().name("pods").build();
/// informer
///     .add_event_handler(queue.clone(), HandlerOptions::new().name("enqueue"))
///     .unwrap();
/// ```
impl EventHandler for WorkQueue<ObjectKey> {
    fn on_add(&mut self, obj: &Arc<Object>, _is_in_initial_list: bool) {
        self.add(obj.key());
    }

    fn on_update(&mut self, _old: &Arc<Object>, new: &Arc<Object>) {
        self.add(new.key());
    }

    fn on_delete(&mut self, obj: &DeltaObject) {
        self.add(obj.key());
    }
}
