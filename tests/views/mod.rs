//! `key → (uid, resourceVersion)` views of the objects, and a handler that rebuilds one.
#![allow(dead_code, unreachable_pub)]

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use informer::Informer;
use informer::distributor::{EventHandler, Notification};
use informer::fifo::DeltaObject;
use informer::object::{Object, ObjectKey};
use informer::reflector::ListerWatcher;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `key → (uid, resourceVersion)`: what a view of the objects is compared on.
pub type ViewMap = BTreeMap<ObjectKey, (String, String)>;

/// `(uid, resourceVersion)` of `o`.
pub fn version(o: &Object) -> (String, String) {
    (o.uid().to_owned(), o.resource_version().to_owned())
}

/// The view of `(key, object)` pairs: a store snapshot, a known-objects map.
pub fn view_of<'a>(entries: impl IntoIterator<Item = (&'a ObjectKey, &'a Arc<Object>)>) -> ViewMap {
    entries
        .into_iter()
        .map(|(k, o)| (k.clone(), version(o)))
        .collect()
}

/// The view of a list's items (`Object`s or `Arc<Object>`s), each under its own key.
pub fn items_view<O: Borrow<Object>>(items: &[O]) -> ViewMap {
    items
        .iter()
        .map(|o| (o.borrow().key(), version(o.borrow())))
        .collect()
}

/// The view of typed objects' metadata (`namespace/name` keys; a missing uid or
/// resourceVersion is empty).
pub fn meta_view<'a>(metas: impl IntoIterator<Item = &'a ObjectMeta>) -> ViewMap {
    metas
        .into_iter()
        .map(|m| {
            (
                ObjectKey::new(
                    m.namespace.as_deref().unwrap_or(""),
                    m.name.as_deref().unwrap(),
                ),
                (
                    m.uid.clone().unwrap_or_default(),
                    m.resource_version.clone().unwrap_or_default(),
                ),
            )
        })
        .collect()
}

/// Where two views differ, in up to 12 lines (`None` when equal): every missing, stale and
/// extra key, where `informer::sim::diff_views` summarizes.
pub fn diff(expected: &ViewMap, got: &ViewMap) -> Option<String> {
    if expected == got {
        return None;
    }
    let mut lines = vec![format!("{} expected, {} got", expected.len(), got.len())];
    for (k, v) in expected {
        match got.get(k) {
            None => lines.push(format!("missing {k} {v:?}")),
            Some(g) if g != v => lines.push(format!("{k}: expected {v:?}, got {g:?}")),
            _ => {}
        }
    }
    for k in got.keys().filter(|k| !expected.contains_key(*k)) {
        lines.push(format!("extra {k}"));
    }
    lines.truncate(12);
    Some(lines.join("; "))
}

/// The informer's store as a view.
pub fn store_view(informer: &Informer<impl ListerWatcher>) -> ViewMap {
    view_of(informer.store().snapshot().iter())
}

/// One notification as a handler saw it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seen {
    Add {
        key: ObjectKey,
        rv: String,
        initial: bool,
    },
    Update {
        key: ObjectKey,
        old_rv: String,
        new_rv: String,
    },
    Delete {
        key: ObjectKey,
        tombstone: bool,
    },
}

/// A handler's view rebuilt from its notifications: every notification in order, counters,
/// and what broke the contract (recorded, not panicked on: the listener would catch a panic
/// and go on with the next notification, hiding it).
#[derive(Default)]
pub struct View {
    pub objects: ViewMap,
    pub seen: Vec<Seen>,
    pub adds: usize,
    pub initial_adds: usize,
    /// Updates that changed the resourceVersion.
    pub updates: usize,
    /// Updates with the same resourceVersion on both sides (resyncs).
    pub syncs: usize,
    pub deletes: usize,
    /// Deletes that came as tombstones (deletions a relist found).
    pub tombstones: usize,
    /// An add of a key the view has, an update from a state it does not hold (or across
    /// keys), a delete of a key it does not have.
    pub violations: Vec<String>,
    /// Tombstones that do not carry the state the view held for their key. A tombstone
    /// carries the last state the informer handed out (client-go
    /// `DeletedFinalStateUnknown.Obj`), so a handler that got every notification holds it; a
    /// coalescing one may not.
    pub stale_tombstones: Vec<String>,
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
                self.seen.push(Seen::Add {
                    key: obj.key(),
                    rv: obj.resource_version().to_owned(),
                    initial: *is_in_initial_list,
                });
            }
            Notification::Update { old, new } => {
                if old.resource_version() == new.resource_version() {
                    self.syncs += 1;
                } else {
                    self.updates += 1;
                }
                if old.key() != new.key() {
                    self.violations
                        .push(format!("update from {} to {}", old.key(), new.key()));
                }
                let prev = self.objects.insert(new.key(), version(new));
                if prev != Some(version(old)) {
                    self.violations
                        .push(format!("update of {} from {prev:?}", new.key()));
                }
                self.seen.push(Seen::Update {
                    key: new.key(),
                    old_rv: old.resource_version().to_owned(),
                    new_rv: new.resource_version().to_owned(),
                });
            }
            Notification::Delete { obj } => {
                self.deletes += 1;
                self.tombstones += usize::from(obj.is_tombstone());
                match self.objects.remove(&obj.key()) {
                    None => self
                        .violations
                        .push(format!("delete of unknown {}", obj.key())),
                    Some(had) if obj.is_tombstone() && had != version(obj.object()) => {
                        self.stale_tombstones.push(format!(
                            "tombstone of {} carries {:?}, the view had {had:?}",
                            obj.key(),
                            version(obj.object())
                        ));
                    }
                    Some(_) => {}
                }
                self.seen.push(Seen::Delete {
                    key: obj.key(),
                    tombstone: obj.is_tombstone(),
                });
            }
        }
    }
}

/// An [`EventHandler`] that applies every notification to a shared [`View`].
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<View>>);

impl Recorder {
    pub fn objects(&self) -> ViewMap {
        self.0.lock().unwrap().objects.clone()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.0.lock().unwrap().seen.clone()
    }

    pub fn clear_seen(&self) {
        self.0.lock().unwrap().seen.clear();
    }

    /// Panics (naming `what`) when the view recorded a violation or a stale tombstone.
    pub fn assert_exact(&self, what: &str) {
        // Copied out: a failed assertion must not poison the lock the handler still takes.
        let (violations, stale) = {
            let v = self.0.lock().unwrap();
            (v.violations.clone(), v.stale_tombstones.clone())
        };
        assert!(violations.is_empty(), "{what}: {violations:?}");
        assert!(stale.is_empty(), "{what}: {stale:?}");
    }
}

impl EventHandler for Recorder {
    fn on_add(&mut self, obj: &Arc<Object>, is_in_initial_list: bool) {
        self.on_notification(&Notification::Add {
            obj: obj.clone(),
            is_in_initial_list,
        });
    }
    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>) {
        self.on_notification(&Notification::Update {
            old: old.clone(),
            new: new.clone(),
        });
    }
    fn on_delete(&mut self, obj: &DeltaObject) {
        self.on_notification(&Notification::Delete { obj: obj.clone() });
    }
    fn on_notification(&mut self, n: &Notification) {
        self.0.lock().unwrap().apply(n);
    }
}

/// `rounds` times: `steps` changes on `sim`, then, once the store holds them and every handler
/// (and stream) has drained, the store must equal the simulator's truth and each of `views`
/// the store, with no violation.
pub async fn flood_rounds_match_truth(
    sim: &informer::sim::SimServer,
    informer: &Arc<Informer<informer::sim::SimServer>>,
    views: &[Recorder],
    rounds: usize,
    steps: u64,
) {
    for round in 0..rounds {
        sim.step(steps).unwrap();
        let truth = sim.truth();
        informer
            .store()
            .wait_for(truth.resource_version)
            .await
            .unwrap();
        // flush waits for the streams too: off the runtime thread, so their readers run.
        let i = informer.clone();
        tokio::task::spawn_blocking(move || i.flush())
            .await
            .unwrap();
        let store = store_view(informer);
        if let Some(d) = truth.diff(&store) {
            panic!("round {round}: store != truth: {d}");
        }
        for (i, v) in views.iter().enumerate() {
            let v = v.0.lock().unwrap();
            assert!(v.violations.is_empty(), "view {i}: {:?}", v.violations);
            assert_eq!(v.objects, store, "round {round}: view {i} != store");
        }
    }
}
