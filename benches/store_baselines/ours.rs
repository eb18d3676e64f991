//! The store under test: `informer::store` (left-right double buffer behind arc-swap).

use std::sync::Arc;

use informer::object::ObjectKey;
use informer::store::{NAMESPACE_INDEX, Store, StoreConfig, WriteBatch, Writer, store};

use super::{Candidate, Indexes, ReadSide, Workload, WriteSide};

struct Reader {
    store: Store,
    keys: Vec<ObjectKey>,
    namespaces: Vec<String>,
}

impl ReadSide for Reader {
    fn get(&self, i: usize) -> bool {
        self.store.get(&self.keys[i]).is_some()
    }

    fn peek(&self, i: usize) -> usize {
        self.store
            .with(&self.keys[i], |o| o.resource_version().len())
            .unwrap_or(0)
    }

    fn get_batch(&self, keys: &[usize]) -> usize {
        let snap = self.store.snapshot();
        keys.iter()
            .filter(|&&i| snap.get(&self.keys[i]).cloned().is_some())
            .count()
    }

    fn by_namespace(&self, ns: usize) -> usize {
        self.store
            .by_index(NAMESPACE_INDEX, &self.namespaces[ns])
            .map(|v| v.len())
            .unwrap_or(0)
    }
}

struct W(Writer);

impl WriteSide for W {
    fn write(&mut self, w: &Workload, pos: usize, n: usize) {
        let mut batch = WriteBatch::with_capacity(n);
        for p in pos..pos + n {
            batch.add(w.update(p).1.clone());
        }
        self.0
            .apply(batch)
            .expect("index functions never fail here");
    }

    fn stats(&self) -> String {
        format!("{} buffer copies so far", self.0.buffer_copies())
    }
}

/// The config of a store with `indexes`.
pub fn config(indexes: Indexes) -> StoreConfig {
    indexes
        .funcs()
        .into_iter()
        .fold(StoreConfig::default().without_indexers(), |c, (n, f)| {
            c.indexer(n, f)
        })
}

/// Fills a store through one `replace` (what an informer's initial list does).
pub fn filled(w: &Workload, indexes: Indexes) -> (Store, Writer) {
    let (reader, mut writer) = store(config(indexes));
    writer
        .replace(w.objects.iter().cloned(), 1)
        .expect("index functions never fail here");
    (reader, writer)
}

/// The candidate's name in reports.
pub const NAME: &str = "informer (left-right)";

pub fn build(w: &Arc<Workload>, indexes: Indexes) -> Candidate {
    let (store, writer) = filled(w, indexes);
    Candidate {
        name: NAME,
        reader: Arc::new(Reader {
            store,
            keys: w.keys.clone(),
            namespaces: w.namespaces.clone(),
        }),
        writer: Box::new(W(writer)),
    }
}
