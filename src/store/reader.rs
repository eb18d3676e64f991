//! The read side: [`Store`] (always the latest version) and [`Snapshot`] (one version, held).

use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::object::{Object, ObjectKey};

use super::error::{StoreError, WaitError};
use super::lookup::LookupKey;
use super::sync::Current;
use super::version::Version;

/// What readers and the writer share: the published version, and the resourceVersion channel
/// that wakes waiters (only [`Store::wait_for`] touches it; data reads never do).
pub(crate) struct Shared {
    pub(crate) current: Current<Version>,
    pub(crate) rv: watch::Receiver<u64>,
}

/// A cheap-to-clone read handle on a store: every call reads the latest published version.
///
/// Reads take no lock and never wait for the [`Writer`](super::Writer) (but for the two
/// short waits the module docs name, *Consistency*): `get`, `with`, `contains_key`, `len` and
/// `resource_version` borrow the current version for the length of the call under a
/// per-thread hazard slot (a store and a fence on this thread's own cache line, no shared
/// reference count); the other reads load it through `arc-swap`. Either way the call looks up
/// in one whole version, and a thread's reads never go back a version, whichever way each
/// reads. Two calls may see two different versions; take a [`Snapshot`] to make several reads
/// agree (see the module docs, *Consistency*).
///
/// `Store` is `Clone + Send + Sync`; clones share the same store.
#[derive(Clone)]
pub struct Store {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.shared.current.load(), f)
    }
}

impl Store {
    /// The object stored under `key` (`namespace/name` or `name`), shared with the store.
    ///
    /// Each call finds the current version anew (under a hazard slot: one memory fence, which
    /// keeps consecutive lookups from overlapping their cache misses); for many lookups in a
    /// row, [`Store::snapshot`] once and [`Snapshot::get`] on it is faster in a large store,
    /// and the lookups agree on one version.
    pub fn get<K: LookupKey + ?Sized>(&self, key: &K) -> Option<Arc<Object>> {
        self.shared.current.read(|v| v.get(key).cloned())
    }

    /// Calls `f` with the object stored under `key`, borrowed from the store, and returns what
    /// it returns; `None` (and `f` not called) when no object is stored under `key`.
    ///
    /// [`Store::get`] without its reference count: no atomic increment and decrement on the
    /// object, whose cache line a `get` must then own. Use it when a read needs a few fields
    /// and not the object itself; clone the `Arc` inside `f` to keep it.
    ///
    /// While `f` runs, the version it reads from is held, as by a [`Snapshot`]: keep `f` short
    /// (a field read, a comparison), since a writer that needs that buffer meanwhile copies the
    /// store's tables instead of waiting. Calling the store again inside `f` is allowed.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use bytes::Bytes;
    /// use informer::store::{StoreConfig, store};
    ///
    /// let (reader, mut writer) = store(StoreConfig::default());
    /// let pod = informer::object::decode(Bytes::from_static(
    ///     br#"{"kind":"Pod","metadata":{"namespace":"ns","name":"a","resourceVersion":"7"}}"#,
    /// ))?;
    /// writer.replace([Arc::new(pod)], 7)?;
    /// assert_eq!(reader.with("ns/a", |o| o.resource_version().to_owned()), Some("7".into()));
    /// assert_eq!(reader.with("ns/b", |o| o.resource_version().len()), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with<K: LookupKey + ?Sized, R>(
        &self,
        key: &K,
        f: impl FnOnce(&Arc<Object>) -> R,
    ) -> Option<R> {
        self.shared.current.read(|v| v.get(key).map(f))
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key<K: LookupKey + ?Sized>(&self, key: &K) -> bool {
        self.shared.current.read(|v| v.get(key).is_some())
    }

    /// Every object, in no particular order (client-go `List`). Allocates one `Vec`; use
    /// [`Snapshot::iter`] to walk the objects without it.
    pub fn list(&self) -> Vec<Arc<Object>> {
        self.snapshot().list()
    }

    /// Every key, in no particular order (client-go `ListKeys`).
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.snapshot().keys()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.shared.current.read(Version::len)
    }

    /// Whether the store holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The resourceVersion the store reflects: the last one given to
    /// [`Writer::apply`](super::Writer::apply), [`replace`](super::Writer::replace) or
    /// [`bookmark`](super::Writer::bookmark); 0 before any.
    pub fn resource_version(&self) -> u64 {
        self.shared.current.read(|v| v.resource_version)
    }

    /// Objects indexed under `value` by index `name`, sorted by key (client-go `ByIndex`).
    ///
    /// # Errors
    /// [`StoreError::UnknownIndex`].
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<Object>>, StoreError> {
        self.shared.current.load().by_index(name, value)
    }

    /// Keys indexed under `value` by index `name`, sorted (client-go `IndexKeys`).
    ///
    /// # Errors
    /// [`StoreError::UnknownIndex`].
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, StoreError> {
        self.shared.current.load().index_keys(name, value)
    }

    /// Every value of index `name` that has at least one object, sorted
    /// (client-go `ListIndexFuncValues`).
    ///
    /// # Errors
    /// [`StoreError::UnknownIndex`].
    pub fn index_values(&self, name: &str) -> Result<Vec<Arc<str>>, StoreError> {
        self.shared.current.load().index_values(name)
    }

    /// Objects sharing at least one value of index `name` with `obj`, each once, sorted by key
    /// (client-go `Index`). `obj` itself need not be in the store.
    ///
    /// # Errors
    /// [`StoreError::UnknownIndex`]; [`StoreError::IndexFunc`] when the index function fails on
    /// `obj`.
    pub fn index(&self, name: &str, obj: &Object) -> Result<Vec<Arc<Object>>, StoreError> {
        self.shared.current.load().index(name, obj)
    }

    /// Names of the store's indexes, in the order they were added.
    pub fn index_names(&self) -> Vec<String> {
        self.shared
            .current
            .load()
            .index_names()
            .map(str::to_owned)
            .collect()
    }

    /// The current version, held: every read on it sees the same objects and indexes at the
    /// same resourceVersion, whatever the writer does meanwhile. Costs one reference-count
    /// increment to take; what holding it costs: see [`Snapshot`].
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            version: self.shared.current.load_full(),
        }
    }

    /// Waits until the store reflects at least resourceVersion `rv` and returns a snapshot of a
    /// version that does (read-your-writes: a controller that wrote an object at `rv` waits for
    /// its own informer to catch up). Returns at once when the store is already there.
    ///
    /// Runtime-agnostic: needs no tokio runtime (it waits on a `tokio::sync::watch` channel
    /// that the writer signals after each publication).
    ///
    /// # Errors
    /// [`WaitError::WriterDropped`] when the writer goes away first. Wrap the call in
    /// `tokio::time::timeout` to bound the wait.
    ///
    /// While it waits it holds no version of the store (a pending call costs the writer
    /// nothing and keeps no replaced object alive).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future loses nothing.
    pub async fn wait_for(&self, rv: u64) -> Result<Snapshot, WaitError> {
        let mut rx = self.shared.rv.clone();
        loop {
            // No snapshot is held across an await: a waiting caller must not keep a version
            // alive (the writer would wait for it, then copy the store).
            let snap = self.snapshot();
            if snap.resource_version() >= rv {
                return Ok(snap);
            }
            drop(snap);
            // The writer publishes a version, then sends its resourceVersion: once the channel
            // shows `rv`, the published version reflects it (unless a replace went back).
            let res = rx.wait_for(|&current| current >= rv).await.map(|_| ());
            let snap = self.snapshot();
            if snap.resource_version() >= rv {
                return Ok(snap);
            }
            let reached = snap.resource_version();
            drop(snap);
            if res.is_err() {
                return Err(WaitError::WriterDropped {
                    wanted: rv,
                    reached,
                });
            }
            // A replace lowered the resourceVersion between the signal and our load: wait for
            // the next change.
            if rx.changed().await.is_err() && self.resource_version() < rv {
                return Err(WaitError::WriterDropped {
                    wanted: rv,
                    reached: self.resource_version(),
                });
            }
        }
    }

    /// [`Store::wait_for`] for threads outside async code: blocks the calling thread (parking
    /// it, no spinning) until the store reflects at least `rv` or `timeout` elapses.
    ///
    /// Do not call it on an async runtime's worker thread: it blocks that thread.
    ///
    /// # Errors
    /// [`WaitError::Timeout`], [`WaitError::WriterDropped`].
    pub fn wait_for_blocking(&self, rv: u64, timeout: Duration) -> Result<Snapshot, WaitError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut fut = pin!(self.wait_for(rv));
        let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(res) = fut.as_mut().poll(&mut cx) {
                return res;
            }
            match deadline {
                None => thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(WaitError::Timeout {
                            wanted: rv,
                            reached: self.resource_version(),
                        });
                    }
                    thread::park_timeout(deadline - now);
                }
            }
        }
    }
}

/// Wakes a parked thread (the waker of [`Store::wait_for_blocking`]).
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// One version of the store, held: all reads on a `Snapshot` see the same objects and indexes,
/// across all shards, at one resourceVersion, and never a part of a batch.
///
/// Cheap to take and to clone (one reference count). A snapshot holds one of the store's two
/// buffers: while it exists, the objects later versions replaced stay in memory, and the writer,
/// finding that buffer held when it next needs it, writes into a fresh copy of the store's
/// tables instead (time O(n), memory one more buffer until the snapshot is dropped; see
/// [`Writer`](super::Writer)). Hold snapshots briefly when the store is written often; for
/// single reads use the [`Store`] methods, which hold nothing after they return.
#[derive(Clone)]
pub struct Snapshot {
    pub(crate) version: Arc<Version>,
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.version, f)
    }
}

impl Snapshot {
    /// The resourceVersion this snapshot reflects (0 before any).
    pub fn resource_version(&self) -> u64 {
        self.version.resource_version
    }

    /// How many versions the writer had published before this one (every `apply`, `replace`,
    /// `bookmark` and `add_indexers` that changed something publishes one). Useful to tell
    /// whether two snapshots are the same version.
    pub fn generation(&self) -> u64 {
        self.version.generation
    }

    /// Number of shards of the store.
    pub fn shard_count(&self) -> usize {
        self.version.shard_count()
    }

    /// The object stored under `key`.
    pub fn get<K: LookupKey + ?Sized>(&self, key: &K) -> Option<&Arc<Object>> {
        self.version.get(key)
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key<K: LookupKey + ?Sized>(&self, key: &K) -> bool {
        self.version.get(key).is_some()
    }

    /// Every `(key, object)`, shard after shard, in no particular order; allocates nothing.
    pub fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<Object>)> + '_ {
        self.version.iter()
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<Object>> {
        let mut out = Vec::with_capacity(self.len());
        out.extend(self.iter().map(|(_, o)| o.clone()));
        out
    }

    /// Every key, in no particular order.
    pub fn keys(&self) -> Vec<ObjectKey> {
        let mut out = Vec::with_capacity(self.len());
        out.extend(self.iter().map(|(k, _)| k.clone()));
        out
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.version.len()
    }

    /// Whether the snapshot holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Objects indexed under `value` by index `name`, sorted by key.
    ///
    /// # Errors
    /// [`StoreError::UnknownIndex`].
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<Object>>, StoreError> {
        self.version.by_index(name, value)
    }

    /// Keys indexed under `value` by index `name`, ascending, without allocating.
    ///
    /// # Errors
    /// [`StoreError::UnknownIndex`].
    pub fn index_key_iter(
        &self,
        name: &str,
        value: &str,
    ) -> Result<impl Iterator<Item = &ObjectKey> + '_, StoreError> {
        self.version.index_key_iter(name, value)
    }

    /// Keys indexed under `value` by index `name`, sorted.
    ///
    /// # Errors
    /// [`StoreError::UnknownIndex`].
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, StoreError> {
        self.version.index_keys(name, value)
    }

    /// Every value of index `name` that has at least one object, sorted.
    ///
    /// # Errors
    /// [`StoreError::UnknownIndex`].
    pub fn index_values(&self, name: &str) -> Result<Vec<Arc<str>>, StoreError> {
        self.version.index_values(name)
    }

    /// Objects sharing at least one value of index `name` with `obj`, each once, sorted by key.
    ///
    /// # Errors
    /// [`StoreError::UnknownIndex`]; [`StoreError::IndexFunc`] when the index function fails on
    /// `obj`.
    pub fn index(&self, name: &str, obj: &Object) -> Result<Vec<Arc<Object>>, StoreError> {
        self.version.index(name, obj)
    }

    /// Names of the indexes, in the order they were added.
    pub fn index_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.version.index_names()
    }
}
