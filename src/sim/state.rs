//! The server's state behind one mutex: objects, the resourceVersion counter, the event log
//! (history window) with each event's encoded frame, list snapshots, and the positions of open
//! watchers (for flow control).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use tokio::time::Instant;

use super::SimError;
use super::app_rests::AppRests;
use super::codec::{Codec, Dynamic, VERSION_LABEL, encode_event};
use super::config::SimConfig;
use super::fault::Faults;
use super::request::SimRequest;
use super::rng::{SimRng, mix};
use super::vary::Variation;
use crate::object::{
    self, DecodeError, Object, ObjectKey, ObjectMeta, ObjectMetaFields, OwnerReference, Str, Time,
    WatchEvent, WatchEventType,
};

/// Creation timestamps are this many seconds after the epoch plus the object's resourceVersion
/// (2023-11-14T22:13:20Z + rv): deterministic, and later objects are younger.
const BASE_TIME: i64 = 1_700_000_000;

/// Whether objects are Deployments, named after their app (`app-N`, one per namespace and app)
/// rather than generated names.
fn named_by_app(cfg: &SimConfig) -> bool {
    let gvk = cfg.templates.gvk();
    gvk.group == "apps" && gvk.kind == "Deployment"
}

/// Most objects a server can hold: `namespaces * apps` Deployments (one per namespace and
/// app); unbounded for other kinds.
pub(crate) fn capacity(cfg: &SimConfig) -> usize {
    if named_by_app(cfg) {
        cfg.namespaces.max(1) as usize * cfg.apps.max(1) as usize
    } else {
        usize::MAX
    }
}

/// The app of a Deployment named `app-N` (`N` below [`SimConfig::apps`]); `None` for other
/// names and kinds (they get a random app).
fn app_of_name(cfg: &SimConfig, name: &str) -> Option<u32> {
    if !named_by_app(cfg) {
        return None;
    }
    let n: u32 = name.strip_prefix("app-")?.parse().ok()?;
    (n < cfg.apps.max(1)).then_some(n)
}

/// One version of one object, kept as the pieces it is encoded from (see [`super::codec`]) and
/// its wire form; the decoded [`Object`] is built on first request.
#[derive(Debug)]
pub(crate) struct Rec {
    pub(super) template: usize,
    /// The object's own fields but `metadata` ([`SimConfig::vary`]); `None`: the template's.
    pub(super) rest: Option<Bytes>,
    /// Its variation's seed and creation time (seconds), kept for its life: a move to another
    /// template (a Pod's next state) keeps its node, IPs, images and times.
    pub(super) vary_seed: (u64, i64),
    pub(super) static_meta: Bytes,
    pub(super) labels: Bytes,
    pub(super) version: Option<String>,
    pub(super) generation: i64,
    /// The object's wire form (protobuf envelope or JSON document): a slice of its frame.
    pub(crate) wire: Bytes,
    pub(super) obj: OnceLock<Arc<Object>>,
}

impl Rec {
    /// The decoded object (decoded once, zero-copy from the wire form).
    pub(crate) fn object(&self) -> Result<Arc<Object>, DecodeError> {
        if let Some(o) = self.obj.get() {
            return Ok(o.clone());
        }
        let o = Arc::new(object::decode(self.wire.clone())?);
        Ok(self.obj.get_or_init(|| o).clone())
    }
}

/// One list item: key and object version, in key order inside a snapshot.
pub(crate) type Item = (ObjectKey, Arc<Rec>);

/// One change, kept for watches.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The change's resourceVersion.
    pub(crate) rv: u64,
    /// Added, Modified or Deleted.
    pub(crate) kind: WatchEventType,
    /// The object's key.
    pub(crate) key: ObjectKey,
    /// The version before the change (`None` for creations): lets a list be rebuilt at an
    /// older resourceVersion.
    pub(crate) prev: Option<Arc<Rec>>,
    /// The event encoded in the server's watch format, once, shared by every watcher.
    pub(crate) frame: Bytes,
    /// An encoded BOOKMARK at `rv`, on every `bookmark_every`-th resourceVersion.
    pub(crate) bookmark: Option<Bytes>,
}

/// A list's consistent view: every object at one resourceVersion, sorted by key.
#[derive(Debug)]
struct Snapshot {
    rv: u64,
    items: Arc<[Item]>,
}

/// Which kind of change a flood step makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Create,
    Update,
    Delete,
}

/// Everything that changes, guarded by the server's one mutex.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) codec: Arc<Codec>,
    /// Per-object spec and status ([`SimConfig::vary`]).
    variation: Option<Variation>,
    /// Deployments' fields but metadata, per template and app ([`AppRests`]).
    app_rests: AppRests,
    /// Current objects by key.
    pub(crate) objects: BTreeMap<ObjectKey, Arc<Rec>>,
    /// The same keys in a vector, for uniform random picks.
    keys: Vec<ObjectKey>,
    /// Index of each key in `keys`.
    pos: HashMap<ObjectKey, usize>,
    /// The current resourceVersion (of the last change, or the start value).
    pub(crate) rv: u64,
    /// Changes with resourceVersions `compacted + 1 ..= rv`, oldest first (consecutive).
    pub(crate) log: VecDeque<Entry>,
    /// Every change up to this resourceVersion has left the history window.
    pub(crate) compacted: u64,
    pub(super) rng: SimRng,
    /// uids, seeded per resource so that two simulators of one seed never share one.
    pub(super) uids: SimRng,
    /// Counter for generated names.
    seq: u64,
    /// Changes made since the server started.
    pub(crate) events: u64,
    /// Open watchers: id → resourceVersion up to which they took events.
    watchers: HashMap<u64, u64>,
    next_watcher: u64,
    /// Flow control: resourceVersions of recent lists and closed watches whose history is kept
    /// until the deadline (or until a watch starts at or after them).
    holds: Vec<(u64, Instant)>,
    /// Recent list snapshots, for `continue` tokens.
    snapshots: VecDeque<Snapshot>,
    /// Injected faults waiting to fire.
    pub(crate) faults: Faults,
    /// Recent requests, oldest first (at most `SimConfig::request_log`).
    pub(crate) requests: VecDeque<SimRequest>,
}

impl State {
    pub(crate) fn new(cfg: &SimConfig) -> Result<Self, SimError> {
        Ok(State {
            codec: Arc::new(Codec::new(&cfg.templates)?),
            variation: cfg
                .vary
                .then(|| Variation::new(&cfg.templates))
                .transpose()?,
            app_rests: AppRests::default(),
            objects: BTreeMap::new(),
            keys: Vec::new(),
            pos: HashMap::new(),
            rv: cfg.start_resource_version,
            log: VecDeque::new(),
            compacted: cfg.start_resource_version,
            rng: SimRng::new(cfg.seed),
            uids: SimRng::for_resource(cfg.seed, &cfg.resource),
            seq: 0,
            events: 0,
            watchers: HashMap::new(),
            next_watcher: 0,
            holds: Vec::new(),
            snapshots: VecDeque::new(),
            faults: Faults::default(),
            requests: VecDeque::new(),
        })
    }

    // ----- changes -----------------------------------------------------------------------

    /// Metadata for a new object stamped from `template`, of app `app-<app>`.
    ///
    /// Ownership follows a real cluster's Deployment → ReplicaSet → Pod chain: a Deployment
    /// `app-N` owns a ReplicaSet `app-N-<pod-template-hash>` (one hash per app), which owns
    /// the Pods that carry that hash in their `pod-template-hash` label. Objects of templates
    /// with owner references (the Pods) get that ReplicaSet of their namespace as their one
    /// controlling owner; Deployments get no owner, no `pod-template-hash` label and no
    /// `generateName`.
    fn fresh_meta(
        &mut self,
        cfg: &SimConfig,
        template: &Object,
        namespace: &str,
        name: &str,
        app: u32,
    ) -> ObjectMeta {
        let t = template.meta();
        let mut m = t.to_fields();
        let app_name = format!("app-{app}");
        let hash = format!("{:08x}", mix(cfg.seed ^ u64::from(app)) as u32);
        let deployment = named_by_app(cfg);
        m.name = name.into();
        m.generate_name = if t.generate_name().is_empty() || deployment {
            Str::default()
        } else {
            format!("{app_name}-{hash}-").into()
        };
        m.namespace = if t.namespace().is_empty() {
            Str::default()
        } else {
            namespace.into()
        };
        m.uid = self.uids.uuid().into();
        m.generation = Some(1);
        m.creation_timestamp = Some(Time {
            seconds: BASE_TIME + (self.rv + 1) as i64,
            nanos: 0,
        });
        m.deletion_timestamp = None;
        m.deletion_grace_period_seconds = None;
        m.labels.insert("app".into(), app_name.clone().into());
        if !deployment {
            m.labels
                .insert("pod-template-hash".into(), hash.clone().into());
        }
        m.labels.insert(VERSION_LABEL.into(), "v0".into());
        for i in 0..cfg.extra_labels {
            m.labels.insert(
                format!("informer.sim/label-{i}").into(),
                format!("value-{i}").into(),
            );
        }
        for i in 0..cfg.extra_annotations {
            m.annotations.insert(
                format!("informer.sim/annotation-{i}").into(),
                format!("{name}-{i}").into(),
            );
        }
        if deployment {
            m.owner_references.clear();
        } else if !t.owner_references().is_empty() {
            // One controlling owner per namespace and app, with a stable uid: owner indexes
            // see real groups, and ReplicaSets of two namespaces are two objects.
            let ns_hash = m
                .namespace
                .bytes()
                .fold(0x6f77_6e65_7200_0000, |h, b| mix(h ^ u64::from(b)));
            let uid = SimRng::new(mix(cfg.seed ^ ns_hash ^ u64::from(app))).uuid();
            m.owner_references = vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: format!("{app_name}-{hash}").into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }];
        }
        m.into()
    }

    /// Creates `namespace/name` from a random template, with generated labels.
    pub(crate) fn create(
        &mut self,
        cfg: &SimConfig,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Rec>, SimError> {
        let templates = cfg.templates.objects();
        let template = self.rng.below(templates.len() as u64) as usize;
        let app = match app_of_name(cfg, name) {
            Some(app) => app,
            None => self.rng.below(u64::from(cfg.apps.max(1))) as u32,
        };
        let meta = self.fresh_meta(cfg, &templates[template], namespace, name, app);
        let key = meta.key();
        if self.objects.contains_key(&key) {
            return Err(SimError::AlreadyExists(key));
        }
        let static_meta = self.codec.static_meta(&meta)?;
        let (labels, version) = self.codec.labels(meta.labels());
        let created = meta.creation_timestamp().as_ref().map_or(0, |t| t.seconds);
        let vary_seed = if self.variation.is_some() {
            (self.rng.next_u64(), created)
        } else {
            (0, 0)
        };
        let rest = self.varied_rest(cfg, template, vary_seed, name)?;
        let rec = Rec {
            template,
            rest,
            vary_seed,
            static_meta,
            labels,
            version,
            generation: 1,
            wire: Bytes::new(),
            obj: OnceLock::new(),
        };
        self.commit(cfg, WatchEventType::Added, key, rec, None)
    }

    /// `template`'s fields but `metadata` for the object `name`: a Deployment `app-N`'s
    /// selecting its app, a varied copy when objects vary ([`SimConfig::vary`]), else `None`
    /// (the template's own).
    fn varied_rest(
        &mut self,
        cfg: &SimConfig,
        template: usize,
        (seed, created): (u64, i64),
        name: &str,
    ) -> Result<Option<Bytes>, SimError> {
        if let Some(app) = app_of_name(cfg, name) {
            return self.app_rests.rest(cfg, template, app).map(Some);
        }
        match &self.variation {
            Some(v) => Ok(Some(v.rest(template, seed, created)?)),
            None => Ok(None),
        }
    }

    fn current(&self, key: &ObjectKey) -> Result<Arc<Rec>, SimError> {
        self.objects
            .get(key)
            .cloned()
            .ok_or_else(|| SimError::NotFound(key.clone()))
    }

    /// The flood's update of `key`: a new `version` label, `generation` + 1 (no decoding, no
    /// metadata re-encoding).
    pub(crate) fn relabel(
        &mut self,
        cfg: &SimConfig,
        key: &ObjectKey,
    ) -> Result<Arc<Rec>, SimError> {
        let prev = self.current(key)?;
        let current = prev.version.as_deref().unwrap_or("");
        let mut next = format!("v{}", self.rng.below(8));
        if next == current {
            next = format!("v{}", 8 + self.rng.below(8));
        }
        let (template, rest) = if cfg.update_template {
            let t = self.rng.below(cfg.templates.len() as u64) as usize;
            let rest = if t == prev.template {
                prev.rest.clone()
            } else {
                self.varied_rest(cfg, t, prev.vary_seed, key.name())?
            };
            (t, rest)
        } else {
            (prev.template, prev.rest.clone())
        };
        let rec = Rec {
            template,
            rest,
            vary_seed: prev.vary_seed,
            static_meta: prev.static_meta.clone(),
            labels: prev.labels.clone(),
            version: Some(next),
            generation: prev.generation + 1,
            wire: Bytes::new(),
            obj: OnceLock::new(),
        };
        self.commit(cfg, WatchEventType::Modified, key.clone(), rec, Some(prev))
    }

    /// Updates `key`: `change` edits a copy of its metadata (name and namespace are kept), then
    /// `generation` is bumped and the next resourceVersion stamped.
    pub(crate) fn update_meta(
        &mut self,
        cfg: &SimConfig,
        key: &ObjectKey,
        change: impl FnOnce(&mut ObjectMetaFields),
    ) -> Result<Arc<Rec>, SimError> {
        let prev = self.current(key)?;
        let obj = prev.object()?;
        let old = obj.meta();
        let mut meta = old.to_fields();
        change(&mut meta);
        meta.name = old.name().into();
        meta.namespace = old.namespace().into();
        let meta = ObjectMeta::from(meta);
        let static_meta = self.codec.static_meta(&meta)?;
        let (labels, version) = self.codec.labels(meta.labels());
        let rec = Rec {
            template: prev.template,
            rest: prev.rest.clone(),
            vary_seed: prev.vary_seed,
            static_meta,
            labels,
            version,
            generation: prev.generation + 1,
            wire: Bytes::new(),
            obj: OnceLock::new(),
        };
        self.commit(cfg, WatchEventType::Modified, key.clone(), rec, Some(prev))
    }

    /// Deletes `key`; the DELETED event carries its last state with the new resourceVersion.
    pub(crate) fn delete(
        &mut self,
        cfg: &SimConfig,
        key: &ObjectKey,
    ) -> Result<Arc<Rec>, SimError> {
        let prev = self.current(key)?;
        let rec = Rec {
            template: prev.template,
            rest: prev.rest.clone(),
            vary_seed: prev.vary_seed,
            static_meta: prev.static_meta.clone(),
            labels: prev.labels.clone(),
            version: prev.version.clone(),
            generation: prev.generation,
            wire: Bytes::new(),
            obj: OnceLock::new(),
        };
        self.commit(cfg, WatchEventType::Deleted, key.clone(), rec, Some(prev))
    }

    /// Records a change: next resourceVersion, encoded frame (the object's wire form is a slice
    /// of it), object maps, history window.
    pub(super) fn commit(
        &mut self,
        cfg: &SimConfig,
        kind: WatchEventType,
        key: ObjectKey,
        mut rec: Rec,
        prev: Option<Arc<Rec>>,
    ) -> Result<Arc<Rec>, SimError> {
        let rv = self.rv + 1;
        let d = Dynamic {
            resource_version: rv,
            generation: rec.generation,
            labels: &rec.labels,
            version: rec.version.as_deref(),
        };
        let (frame, wire) = self.codec.change_frame(
            kind,
            rec.template,
            rec.rest.as_deref(),
            &rec.static_meta,
            &d,
        );
        rec.wire = frame.slice(wire);
        let bookmark = if cfg.bookmark_every > 0 && rv.is_multiple_of(cfg.bookmark_every) {
            let encoding = cfg.templates.encoding();
            let mut b = Vec::with_capacity(96);
            let ev = WatchEvent::bookmark(
                cfg.templates.gvk().clone(),
                &rv.to_string(),
                false,
                encoding,
            );
            encode_event(encoding, &ev, &mut b)?;
            Some(Bytes::from(b))
        } else {
            None
        };
        let rec = Arc::new(rec);
        match kind {
            WatchEventType::Added => {
                self.pos.insert(key.clone(), self.keys.len());
                self.keys.push(key.clone());
                self.objects.insert(key.clone(), rec.clone());
            }
            WatchEventType::Modified => {
                self.objects.insert(key.clone(), rec.clone());
            }
            _ => {
                self.objects.remove(&key);
                if let Some(i) = self.pos.remove(&key) {
                    self.keys.swap_remove(i);
                    if let Some(moved) = self.keys.get(i) {
                        self.pos.insert(moved.clone(), i);
                    }
                }
            }
        }
        self.log.push_back(Entry {
            rv,
            kind,
            key,
            prev,
            frame,
            bookmark,
        });
        self.rv = rv;
        self.events += 1;
        self.trim(cfg);
        Ok(rec)
    }

    /// One generated change, chosen by the configured mix.
    pub(crate) fn random_step(&mut self, cfg: &SimConfig) -> Result<(), SimError> {
        let n = self.objects.len();
        let mix = cfg.mix;
        let mut op = if n < mix.target_objects {
            Op::Create
        } else {
            let total = u64::from(mix.create) + u64::from(mix.update) + u64::from(mix.delete);
            let r = if total == 0 { 0 } else { self.rng.below(total) };
            let op = if total == 0 {
                Op::Update
            } else if r < u64::from(mix.create) {
                Op::Create
            } else if r < u64::from(mix.create) + u64::from(mix.update) {
                Op::Update
            } else {
                Op::Delete
            };
            if op == Op::Create && n >= mix.target_objects + (mix.target_objects / 10).max(1) {
                Op::Update
            } else {
                op
            }
        };
        if n == 0 {
            op = Op::Create;
        }
        let by_app = named_by_app(cfg);
        if op == Op::Create && n >= capacity(cfg) {
            // Every namespace has every app's Deployment.
            op = Op::Update;
        }
        match op {
            Op::Create if by_app => loop {
                let ns = format!("ns-{}", self.rng.below(u64::from(cfg.namespaces.max(1))));
                let name = format!("app-{}", self.rng.below(u64::from(cfg.apps.max(1))));
                match self.create(cfg, &ns, &name) {
                    Err(SimError::AlreadyExists(_)) => continue,
                    r => return r.map(drop),
                }
            },
            Op::Create => loop {
                self.seq += 1;
                let ns = format!("ns-{}", self.rng.below(u64::from(cfg.namespaces.max(1))));
                let name = format!("{}-{:06x}", cfg.resource.trim_end_matches('s'), self.seq);
                match self.create(cfg, &ns, &name) {
                    Err(SimError::AlreadyExists(_)) => continue,
                    r => return r.map(drop),
                }
            },
            Op::Update => {
                let key = self.keys[self.rng.below(n as u64) as usize].clone();
                self.relabel(cfg, &key).map(drop)
            }
            Op::Delete => {
                let key = self.keys[self.rng.below(n as u64) as usize].clone();
                self.delete(cfg, &key).map(drop)
            }
        }
    }

    // ----- history window and flow control ------------------------------------------------

    /// Drops history beyond the window, except (with flow control) what a watcher or a hold
    /// still needs.
    fn trim(&mut self, cfg: &SimConfig) {
        if self.log.len() <= cfg.history_window {
            return;
        }
        let keep_after = if cfg.flow_control {
            self.min_hold(Instant::now())
        } else {
            u64::MAX
        };
        while self.log.len() > cfg.history_window && self.compacted < keep_after {
            self.log.pop_front();
            self.compacted += 1;
        }
        let compacted = self.compacted;
        self.snapshots.retain(|s| s.rv >= compacted);
    }

    /// The oldest resourceVersion a watcher or live hold is at (history after it is needed);
    /// `u64::MAX` when none. Expired holds are dropped.
    fn min_hold(&mut self, now: Instant) -> u64 {
        self.holds.retain(|h| h.1 > now);
        let w = self.watchers.values().copied().min().unwrap_or(u64::MAX);
        let h = self.holds.iter().map(|h| h.0).min().unwrap_or(u64::MAX);
        w.min(h)
    }

    /// How far the slowest watcher (or hold) is behind, and when the next hold expires.
    pub(crate) fn lag(&mut self, now: Instant) -> (u64, Option<Instant>) {
        let min = self.min_hold(now);
        let lag = if min == u64::MAX {
            0
        } else {
            self.rv.saturating_sub(min)
        };
        (lag, self.holds.iter().map(|h| h.1).min())
    }

    /// Keeps history after `rv` until `until` (flow control for list → watch).
    pub(crate) fn hold(&mut self, rv: u64, until: Instant) {
        self.holds.push((rv, until));
    }

    /// Registers a watcher that has everything up to `rv`; releases holds it covers.
    pub(crate) fn register_watcher(&mut self, rv: u64) -> u64 {
        self.holds.retain(|h| h.0 > rv);
        let id = self.next_watcher;
        self.next_watcher += 1;
        self.watchers.insert(id, rv);
        id
    }

    /// Records that watcher `id` has taken every event up to `rv`.
    pub(crate) fn advance_watcher(&mut self, id: u64, rv: u64) {
        if let Some(c) = self.watchers.get_mut(&id) {
            *c = rv;
        }
    }

    /// Removes watcher `id`; `hold_until` keeps its position's history a while longer.
    pub(crate) fn unregister_watcher(&mut self, id: u64, hold_until: Option<Instant>) {
        if let (Some(rv), Some(until)) = (self.watchers.remove(&id), hold_until) {
            self.holds.push((rv, until));
        }
    }

    /// Number of open watchers.
    pub(crate) fn watcher_count(&self) -> usize {
        self.watchers.len()
    }

    /// Appends to the request log, dropping the oldest beyond `cfg.request_log`.
    pub(crate) fn log_request(&mut self, cfg: &SimConfig, request: SimRequest) {
        if cfg.request_log == 0 {
            return;
        }
        while self.requests.len() >= cfg.request_log {
            self.requests.pop_front();
        }
        self.requests.push_back(request);
    }

    // ----- snapshots ----------------------------------------------------------------------

    /// Every current object, sorted by key (Arc clones, no object copies).
    pub(crate) fn current_items(&self) -> Arc<[Item]> {
        self.objects
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The objects as they were at `rv`: from the snapshot cache, the current state, or rebuilt
    /// by undoing history. `None` when `rv` is outside the history window.
    pub(crate) fn items_at(&mut self, cfg: &SimConfig, rv: u64) -> Option<Arc<[Item]>> {
        if rv < self.compacted || rv > self.rv {
            return None;
        }
        if let Some(s) = self.snapshots.iter().find(|s| s.rv == rv) {
            return Some(s.items.clone());
        }
        let items = if rv == self.rv {
            self.current_items()
        } else {
            let mut map = self.objects.clone();
            let from = (rv - self.compacted) as usize;
            for e in self.log.range(from..).rev() {
                match (&e.prev, e.kind) {
                    (_, WatchEventType::Added) | (None, _) => {
                        map.remove(&e.key);
                    }
                    (Some(p), _) => {
                        map.insert(e.key.clone(), p.clone());
                    }
                }
            }
            map.into_iter().collect()
        };
        self.cache_snapshot(cfg, rv, items.clone());
        Some(items)
    }

    /// Keeps `items` (the state at `rv`) for later pages of the same list.
    pub(crate) fn cache_snapshot(&mut self, cfg: &SimConfig, rv: u64, items: Arc<[Item]>) {
        if cfg.snapshot_cache == 0 || self.snapshots.iter().any(|s| s.rv == rv) {
            return;
        }
        while self.snapshots.len() >= cfg.snapshot_cache {
            self.snapshots.pop_front();
        }
        self.snapshots.push_back(Snapshot { rv, items });
    }
}
