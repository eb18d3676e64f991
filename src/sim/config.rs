//! [`SimConfig`]: everything that shapes a simulated API server.

use std::time::Duration;

use super::Templates;

/// How the flood generator ([`super::SimServer::step`], [`super::SimServer::flood`]) picks
/// operations.
///
/// While fewer than `target_objects` exist, every step creates. From then on a step is a create,
/// an update or a delete with the given relative weights; a create is turned into an update once
/// the count exceeds the target by 10 % (at least 1), and a delete into a create when nothing
/// exists. The count therefore stays within about 10 % above the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloodMix {
    /// Object count the generator ramps up to and then holds (default 1 000).
    pub target_objects: usize,
    /// Relative weight of creates once the target is reached (default 5).
    pub create: u32,
    /// Relative weight of updates (default 90). An update changes the object's `version`
    /// label and bumps `generation`.
    pub update: u32,
    /// Relative weight of deletes (default 5).
    pub delete: u32,
}

impl Default for FloodMix {
    fn default() -> Self {
        FloodMix {
            target_objects: 1_000,
            create: 5,
            update: 90,
            delete: 5,
        }
    }
}

/// Configuration of a [`super::SimServer`]. Build with [`SimConfig::new`] and the `#[must_use]`
/// setters; every field is public and documented with its default.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Objects are stamped from these; they also fix the kind and the wire encoding.
    pub templates: Templates,
    /// Seed of every random choice (default 0). Same seed and same calls → same objects,
    /// names, uids and resourceVersions.
    pub seed: u64,
    /// The resource's plural name, e.g. `pods` (default: the kind in lower case plus `s`).
    pub resource: String,
    /// Namespaces objects are spread over, `ns-0`… (default 10). Templates without a namespace
    /// (cluster-scoped kinds) stay cluster-scoped.
    pub namespaces: u32,
    /// Distinct `app` label values, `app-0`… (default 50).
    pub apps: u32,
    /// Objects created when the server is built (default 0). A server of Deployments creates
    /// at most `namespaces * apps` (one per namespace and app).
    pub initial_objects: usize,
    /// Whether a generated update ([`super::SimServer::update`] and the flood's) also moves
    /// the object to a template picked at random, the current one included (default false:
    /// an object keeps the template it was created from). With templates that are states of
    /// one object ([`Templates::pod_states`], [`Templates::deployments`]) an update then
    /// changes a Pod's readiness or a Deployment's `spec.replicas`, as real updates do, not
    /// only a label.
    pub update_template: bool,
    /// Whether every object gets its own spec and status, varied from its template's as a real
    /// cluster's Pods differ (node, Pod IP, images and tags, environment values, container IDs,
    /// timestamps, container and volume counts; shapes taken from the
    /// template's values; default false: every object of a template shares its bytes outside
    /// `metadata`). Only for Pod templates ([`SimError::NotPods`](super::SimError::NotPods)
    /// otherwise). Costs a decode and an encode of the template per created object.
    pub vary: bool,
    /// The flood generator's operation mix.
    pub mix: FloodMix,
    /// resourceVersion of the empty server before the first change (default 1; the first
    /// change gets the next one). Must be at least 1: `0` means "any" in the API.
    pub start_resource_version: u64,
    /// Events kept for watches (the watch cache window; default 10 000). A watch or a lagging
    /// watcher that needs an older event gets 410 Expired.
    pub history_window: usize,
    /// A BOOKMARK after every event whose resourceVersion is a multiple of this, for watches
    /// that allow bookmarks (default 1 000; 0 = none).
    pub bookmark_every: u64,
    /// A BOOKMARK at the watch's current resourceVersion whenever this long has passed since
    /// its last bookmark, busy or idle, for watches that allow bookmarks (default 1 s; real
    /// servers send one about every minute; `None` = only [`SimConfig::bookmark_every`]).
    pub bookmark_interval: Option<Duration>,
    /// Lossless flow control for floods (default off). When on, history that an open watcher
    /// (or a recent list or closed watcher, for [`SimConfig::linger`]) still needs is never
    /// dropped, and [`super::SimServer::flood`] waits while the slowest watcher is more than
    /// `history_window` events behind. When off, lagging watchers get 410 Expired as on a real
    /// server.
    pub flow_control: bool,
    /// With flow control: how long the resourceVersion of a list, or of a watch that closed,
    /// keeps history from being dropped, so that the client's next watch from it succeeds
    /// (default 10 s; released early once a watch starts at or after it).
    pub linger: Duration,
    /// Largest page a list returns, whatever `limit` the client asked for (default none).
    /// Real servers may return fewer items than `limit`; clients must follow `continue`.
    pub max_page_size: Option<u32>,
    /// List snapshots kept for `continue` tokens (default 16). A token whose snapshot was
    /// evicted is served by rebuilding the snapshot from history, or gets 410 Expired once
    /// its resourceVersion left the history window.
    pub snapshot_cache: usize,
    /// `continue` tokens older than this get 410 Expired (default none: valid while their
    /// resourceVersion is in the history window).
    pub continue_ttl: Option<Duration>,
    /// Whether the server supports streaming lists (`sendInitialEvents`, default true). When
    /// off, such watches are rejected with 422 Invalid, as by a server without the WatchList
    /// feature.
    pub watch_list: bool,
    /// `retryAfterSeconds` of the server's 504 too-large answers (a resourceVersion it has not
    /// reached), injected or not (default 1, what API servers send since 1.17; 0 sends none,
    /// which clients take as no suggestion: a stress run's knob to keep its fault waits short).
    pub too_large_retry_after: u32,
    /// Standing fault: every watch stream ends cleanly after sending this many
    /// ADDED/MODIFIED/DELETED events (initial ones included; bookmarks not counted). Default
    /// none. With a streaming list larger than this, the stream never reaches its end bookmark.
    pub watch_close_after: Option<u64>,
    /// Standing fault: a list cache lagging this many resourceVersions behind the store
    /// (default 0 = none). Lists with `resourceVersion` `"0"` or `N` (not `Exact`) are served
    /// from the state at `current - list_lag` (or the oldest state in the history window),
    /// even when that is older than the `N` asked for, which a correct server never does (it
    /// waits or answers "too large resource version"); only `resourceVersion=""` (a quorum
    /// read) gets the current state. Watches are not affected.
    pub list_lag: u64,
    /// Requests kept in the request log ([`super::SimServer::requests`]; default 1 024, oldest
    /// dropped first; 0 = none).
    pub request_log: usize,
    /// Upper bound of one watch body chunk in bytes (default 64 KiB): frames are gathered
    /// into chunks up to this size (a single larger frame is sent whole).
    pub max_chunk_bytes: usize,
    /// When set, every chunk is further cut at random points into pieces of 1..=this many
    /// bytes (default none), so frames straddle chunks as on a real network.
    pub split_chunks: Option<usize>,
    /// Extra labels stamped on every new object besides the generated ones (default 0):
    /// `informer.sim/label-I: value-I` for I in `0..extra_labels`. They make objects and
    /// label-selector work heavier, as on clusters whose objects carry many labels.
    pub extra_labels: u32,
    /// Annotations stamped on every new object (default 0): `informer.sim/annotation-I` with
    /// the object's name and I as the value.
    pub extra_annotations: u32,
}

impl SimConfig {
    /// A configuration with the defaults documented on each field.
    pub fn new(templates: Templates) -> Self {
        let resource = format!("{}s", templates.gvk().kind.to_lowercase());
        SimConfig {
            templates,
            seed: 0,
            resource,
            namespaces: 10,
            apps: 50,
            initial_objects: 0,
            update_template: false,
            vary: false,
            mix: FloodMix::default(),
            start_resource_version: 1,
            history_window: 10_000,
            bookmark_every: 1_000,
            bookmark_interval: Some(Duration::from_secs(1)),
            flow_control: false,
            linger: Duration::from_secs(10),
            max_page_size: None,
            snapshot_cache: 16,
            continue_ttl: None,
            watch_list: true,
            too_large_retry_after: 1,
            watch_close_after: None,
            list_lag: 0,
            request_log: 1024,
            max_chunk_bytes: 64 * 1024,
            split_chunks: None,
            extra_labels: 0,
            extra_annotations: 0,
        }
    }

    /// Sets [`SimConfig::seed`].
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`SimConfig::resource`].
    #[must_use]
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = resource.into();
        self
    }

    /// Sets [`SimConfig::namespaces`] (at least 1).
    #[must_use]
    pub fn namespaces(mut self, n: u32) -> Self {
        self.namespaces = n.max(1);
        self
    }

    /// Sets [`SimConfig::apps`] (at least 1).
    #[must_use]
    pub fn apps(mut self, n: u32) -> Self {
        self.apps = n.max(1);
        self
    }

    /// Sets [`SimConfig::initial_objects`].
    #[must_use]
    pub fn initial_objects(mut self, n: usize) -> Self {
        self.initial_objects = n;
        self
    }

    /// Sets [`SimConfig::update_template`].
    #[must_use]
    pub fn update_template(mut self, on: bool) -> Self {
        self.update_template = on;
        self
    }

    /// Sets [`SimConfig::vary`].
    #[must_use]
    pub fn vary(mut self, on: bool) -> Self {
        self.vary = on;
        self
    }

    /// Sets [`SimConfig::mix`].
    #[must_use]
    pub fn mix(mut self, mix: FloodMix) -> Self {
        self.mix = mix;
        self
    }

    /// Sets [`FloodMix::target_objects`].
    #[must_use]
    pub fn target_objects(mut self, n: usize) -> Self {
        self.mix.target_objects = n;
        self
    }

    /// Sets [`SimConfig::start_resource_version`] (at least 1).
    #[must_use]
    pub fn start_resource_version(mut self, rv: u64) -> Self {
        self.start_resource_version = rv.max(1);
        self
    }

    /// Sets [`SimConfig::history_window`] (at least 1).
    #[must_use]
    pub fn history_window(mut self, events: usize) -> Self {
        self.history_window = events.max(1);
        self
    }

    /// Sets [`SimConfig::bookmark_every`].
    #[must_use]
    pub fn bookmark_every(mut self, events: u64) -> Self {
        self.bookmark_every = events;
        self
    }

    /// Sets [`SimConfig::bookmark_interval`].
    #[must_use]
    pub fn bookmark_interval(mut self, interval: Option<Duration>) -> Self {
        self.bookmark_interval = interval.filter(|d| !d.is_zero());
        self
    }

    /// Sets [`SimConfig::flow_control`].
    #[must_use]
    pub fn flow_control(mut self, on: bool) -> Self {
        self.flow_control = on;
        self
    }

    /// Sets [`SimConfig::linger`].
    #[must_use]
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// Sets [`SimConfig::max_page_size`].
    #[must_use]
    pub fn max_page_size(mut self, size: Option<u32>) -> Self {
        self.max_page_size = size.map(|s| s.max(1));
        self
    }

    /// Sets [`SimConfig::snapshot_cache`].
    #[must_use]
    pub fn snapshot_cache(mut self, n: usize) -> Self {
        self.snapshot_cache = n;
        self
    }

    /// Sets [`SimConfig::continue_ttl`].
    #[must_use]
    pub fn continue_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.continue_ttl = ttl;
        self
    }

    /// Sets [`SimConfig::watch_list`].
    #[must_use]
    pub fn watch_list(mut self, on: bool) -> Self {
        self.watch_list = on;
        self
    }

    /// Sets [`SimConfig::too_large_retry_after`] (seconds).
    #[must_use]
    pub fn too_large_retry_after(mut self, seconds: u32) -> Self {
        self.too_large_retry_after = seconds;
        self
    }

    /// Sets [`SimConfig::watch_close_after`].
    #[must_use]
    pub fn watch_close_after(mut self, events: Option<u64>) -> Self {
        self.watch_close_after = events;
        self
    }

    /// Sets [`SimConfig::list_lag`].
    #[must_use]
    pub fn list_lag(mut self, resource_versions: u64) -> Self {
        self.list_lag = resource_versions;
        self
    }

    /// Sets [`SimConfig::request_log`].
    #[must_use]
    pub fn request_log(mut self, requests: usize) -> Self {
        self.request_log = requests;
        self
    }

    /// Sets [`SimConfig::max_chunk_bytes`] (at least 1).
    #[must_use]
    pub fn max_chunk_bytes(mut self, bytes: usize) -> Self {
        self.max_chunk_bytes = bytes.max(1);
        self
    }

    /// Sets [`SimConfig::split_chunks`].
    #[must_use]
    pub fn split_chunks(mut self, max_piece: Option<usize>) -> Self {
        self.split_chunks = max_piece.map(|m| m.max(1));
        self
    }

    /// Sets [`SimConfig::extra_labels`].
    #[must_use]
    pub fn extra_labels(mut self, n: u32) -> Self {
        self.extra_labels = n;
        self
    }

    /// Sets [`SimConfig::extra_annotations`].
    #[must_use]
    pub fn extra_annotations(mut self, n: u32) -> Self {
        self.extra_annotations = n;
        self
    }
}
