//! What `benches/store.rs` and `benches/store_memory.rs` compare: the same workload (the real
//! etcd Pod fixture re-keyed to N objects) in our store and in every baseline and candidate
//! structure, behind one small read/write interface.
//!
//! Baselines (other people's designs):
//! - [`kube`]: kube-runtime's `reflector::store` (`RwLock<AHashMap<ObjectRef, Arc<Pod>>>`, no
//!   indexes), filled offline through its `Writer`;
//! - [`client_go`]: a port of client-go's `threadSafeMap` (one `RwLock` over the items map
//!   and the index maps);
//! - [`locked`]: `parking_lot::RwLock<HashMap>` with index maps in the same lock, batches
//!   applied under one write lock (the obvious Rust design);
//! - [`dash`]: dashmap for items and for each index (per-shard locks, no cross-map atomicity).
//!
//! Candidate structures for our store (the consistency contract: lock-free readers, snapshots
//! consistent across shards):
//! - the store in `src/store` (left-right double buffer behind arc-swap);
//! - [`imbl_store`]: the previous design, imbl persistent HAMTs behind one arc-swap;
//! - [`cow_shards`]: per-shard copy-on-write hash maps behind one arc-swap.

pub mod client_go;
pub mod cow_shards;
pub mod dash;
pub mod imbl_store;
pub mod kube;
pub mod locked;
pub mod ours;
pub mod workload;

use std::sync::Arc;

use informer::store::{
    IndexFunc, LABELS_INDEX, NAMESPACE_INDEX, OWNER_UID_INDEX, UID_INDEX, labels_index_func,
    namespace_index_func, owner_uid_index_func, uid_index_func,
};

pub use workload::Workload;

/// The read side of a store under test. Keys and index values are given as positions in the
/// [`Workload`] so that each store can prepare them in its own key type beforehand.
pub trait ReadSide: Send + Sync {
    /// Looks up the object with key number `i` (taking a reference to it, dropped on return);
    /// whether it was found.
    fn get(&self, i: usize) -> bool;
    /// Reads the object with key number `i` through a borrow where the store has one (no
    /// reference count touched: dashmap's and the locked maps' guards, our `Store::with`):
    /// the length of its resourceVersion, 0 when not found.
    fn peek(&self, i: usize) -> usize;
    /// Looks up every key number in `keys` (taking and dropping a reference to each object)
    /// under one read section where the store has one (our `Snapshot`, the locked maps' read
    /// guard), else one call per key (dashmap: no guard over the whole map; kube-runtime);
    /// how many were found.
    fn get_batch(&self, keys: &[usize]) -> usize {
        keys.iter().filter(|&&i| self.get(i)).count()
    }
    /// Objects in namespace number `ns` (through the namespace index where the store has one);
    /// how many.
    fn by_namespace(&self, ns: usize) -> usize;
}

/// The write side of a store under test.
pub trait WriteSide: Send {
    /// Applies `n` updates, positions `pos..pos + n` of the workload's update cycle, in the
    /// store's natural unit: one batch where it has batches, else one call per object.
    fn write(&mut self, w: &Workload, pos: usize, n: usize);
    /// Anything worth printing after a flood.
    fn stats(&self) -> String {
        String::new()
    }
}

/// A store under test.
pub struct Candidate {
    pub name: &'static str,
    pub reader: Arc<dyn ReadSide>,
    pub writer: Box<dyn WriteSide>,
}

/// The index sets of the write benches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexes {
    /// No index at all.
    Zero,
    /// namespace only (the store's default).
    One,
    /// namespace + labels.
    Two,
    /// namespace + labels + owner UID + UID.
    Four,
}

impl Indexes {
    pub fn count(self) -> usize {
        match self {
            Indexes::Zero => 0,
            Indexes::One => 1,
            Indexes::Two => 2,
            Indexes::Four => 4,
        }
    }

    /// Names and functions, the namespace index first.
    pub fn funcs(self) -> Vec<(&'static str, IndexFunc)> {
        let all = [
            (NAMESPACE_INDEX, namespace_index_func()),
            (LABELS_INDEX, labels_index_func()),
            (OWNER_UID_INDEX, owner_uid_index_func()),
            (UID_INDEX, uid_index_func()),
        ];
        all.into_iter().take(self.count()).collect()
    }
}

/// Builds one candidate filled with the workload.
type Builder = fn(&Arc<Workload>, Indexes) -> Candidate;

/// Every candidate and baseline that supports `indexes` (kube-runtime has no indexes: only
/// with [`Indexes::Zero`], or when `with_kube` asks for it regardless, for reads, where its
/// namespace query is a filtered scan; and only when the workload has its Pods) and whose name
/// `want` accepts, filled with the workload (those not wanted are not built).
pub fn all(
    w: &Arc<Workload>,
    indexes: Indexes,
    with_kube: bool,
    want: impl Fn(&str) -> bool,
) -> Vec<Candidate> {
    let builders: [(&str, Builder); 6] = [
        (ours::NAME, ours::build),
        (imbl_store::NAME, imbl_store::build),
        (cow_shards::NAME, cow_shards::build),
        (locked::NAME, locked::build),
        (dash::NAME, dash::build),
        (client_go::NAME, client_go::build),
    ];
    let mut out: Vec<Candidate> = builders
        .into_iter()
        .filter(|(name, _)| want(name))
        .map(|(_, build)| build(w, indexes))
        .collect();
    // A workload built without its k8s-openapi twins has none to fill kube-runtime's store.
    if (with_kube || indexes == Indexes::Zero) && !w.pods.is_empty() && want(kube::NAME) {
        out.push(kube::build(w));
    }
    out
}
