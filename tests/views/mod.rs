//! A handler that rebuilds its view of the objects from its notifications and counts what it
//! got, for the informer contract tests (tests/informer.rs, tests/handler_contract.rs).
//! Contract violations are recorded, not panicked on: the listener would catch a panic and go
//! on with the next notification, hiding it.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use informer::Informer;
use informer::distributor::{EventHandler, Notification};
use informer::fifo::DeltaObject;
use informer::object::{Object, ObjectKey};
use informer::reflector::ListerWatcher;
use informer::sim::{FloodMix, SimConfig, Templates, default_fixtures_dir};

pub type ViewMap = BTreeMap<ObjectKey, (String, String)>;

pub fn version(o: &Object) -> (String, String) {
    (o.uid().to_owned(), o.resource_version().to_owned())
}

/// A handler's view rebuilt from its notifications, with counters and contract violations
/// (counted, not panicked: the listener would catch a panic and go on).
#[derive(Default)]
pub struct View {
    pub objects: ViewMap,
    pub adds: usize,
    pub initial_adds: usize,
    pub updates: usize,
    pub syncs: usize,
    pub deletes: usize,
    /// Deletes that came as tombstones (deletions a relist found).
    pub tombstones: usize,
    pub violations: Vec<String>,
}

impl View {
    pub fn apply(&mut self, n: &Notification) {
        match n {
            Notification::Add {
                obj,
                is_in_initial_list,
            } => {
                self.adds += 1;
                self.initial_adds += usize::from(*is_in_initial_list);
                if self.objects.insert(obj.key(), version(obj)).is_some() {
                    self.violations.push(format!("add of known {}", obj.key()));
                }
            }
            Notification::Update { old, new } => {
                if old.resource_version() == new.resource_version() {
                    self.syncs += 1;
                } else {
                    self.updates += 1;
                }
                let prev = self.objects.insert(new.key(), version(new));
                if prev != Some(version(old)) {
                    self.violations
                        .push(format!("update of {} from {prev:?}", new.key()));
                }
            }
            Notification::Delete { obj } => {
                self.deletes += 1;
                self.tombstones += usize::from(matches!(obj, DeltaObject::Tombstone(_)));
                if self.objects.remove(&obj.key()).is_none() {
                    self.violations
                        .push(format!("delete of unknown {}", obj.key()));
                }
            }
        }
    }
}

#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<View>>);

impl EventHandler for Recorder {
    fn on_add(&mut self, obj: &Arc<Object>, is_in_initial_list: bool) {
        self.0.lock().unwrap().apply(&Notification::Add {
            obj: obj.clone(),
            is_in_initial_list,
        });
    }
    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>) {
        self.0.lock().unwrap().apply(&Notification::Update {
            old: old.clone(),
            new: new.clone(),
        });
    }
    fn on_delete(&mut self, obj: &DeltaObject) {
        self.0
            .lock()
            .unwrap()
            .apply(&Notification::Delete { obj: obj.clone() });
    }
}

/// A simulator of the real etcd Pod holding about `objects`, with creates, updates and deletes.
pub fn sim_config(objects: usize, seed: u64) -> SimConfig {
    let dir = default_fixtures_dir().unwrap();
    SimConfig::new(Templates::etcd_pod(&dir).unwrap())
        .seed(seed)
        .initial_objects(objects)
        .mix(FloodMix {
            target_objects: objects,
            create: 10,
            update: 70,
            delete: 20,
        })
}

pub fn store_view(informer: &Informer<impl ListerWatcher>) -> ViewMap {
    informer
        .store()
        .snapshot()
        .iter()
        .map(|(k, o)| (k.clone(), version(o)))
        .collect()
}
