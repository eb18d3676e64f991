//! [`Compression`]: how an informer keeps its cached objects' bytes, and [`CacheStats`], what
//! they cost.

use std::sync::Arc;

use crate::object::Dictionary;
use crate::store::Snapshot;

/// How an informer holds the bytes of the objects it caches ([`InformerConfig::compression`]).
///
/// With [`Compression::Zstd`] the processing thread, whenever the DeltaFIFO is empty, rewrites
/// the objects written since it last did into their compact form
/// ([`Compactor`](crate::object::Compactor)): the body one zstd frame made with a dictionary
/// trained from this informer's own objects, the metadata's labels, annotations, owner
/// references and finalizers shared with the objects that have the same ones
/// ([`MetaTails`](crate::object::MetaTails)). Reads see the same objects (equal metadata, equal
/// bytes through [`Object::raw`](crate::object::Object::raw), equal typed decodes); a typed
/// read of a compressed object decompresses first. Events carry the objects as decoded, except
/// listed ones once a dictionary exists, which arrive compacted (or, on a relist and unchanged,
/// as the stored object); the store's copy
/// is replaced without a notification (each such write is a store version:
/// [`Snapshot::generation`](crate::store::Snapshot::generation) moves, the resourceVersion
/// does not). Fewer than 16 cached objects are never compressed (too few to train on).
///
/// A trained dictionary is trained again when a window of 1 024 compactions compresses 1.5×
/// worse than its first window did (the objects drifted from those it learned); objects
/// compressed with the old one keep it.
///
/// Nothing is compressed while events keep arriving faster than they are applied (the
/// compaction waits for an empty queue), so ingest keeps its speed and only the objects that
/// stay in the cache are compressed. The first dictionary is trained from the first list's
/// first objects ([`ZstdOptions::train_samples`]) while the list goes on; from then on listed
/// objects are compacted as each page arrives, and on a relist those the cache already holds
/// at the same resourceVersion are kept as they are. A list's objects that arrive before its
/// dictionary is trained are compacted when the list ends if it is trained by then, else when
/// the informer is idle (100 000 varied HEAD Pods: 213 MB of peak RSS for the first list, it
/// was 1 441 MB). A first list too short to fill the samples is trained on after the sync,
/// from the cache.
///
/// The compressed body of a protobuf object leaves out its metadata when re-encoding the
/// decoded metadata gives back exactly its bytes (objects as the API server writes them): a
/// read writes it back first. For a 1.6 KB etcd Pod that is a third of the bytes and frames
/// 40 % smaller; a typed decode of such an object re-encodes about 600 bytes of metadata.
///
/// `metadata.managedFields` entries are kept, uncompressed, in each object's own buffer
/// ([`ObjectMeta::managed_fields`](crate::object::ObjectMeta::managed_fields) reads the same
/// with or without compression); drop them with
/// [`strip_managed_fields`](super::strip_managed_fields) when no handler reads them.
///
/// The default is [`Compression::None`]: compression pays off by object size (100 000 varied
/// Pods under `informer watch`, 2026-12-07: 14× less RSS for 13 KB HEAD Pods, 9× for the
/// mixed template, 3.9× for 1.6 KB etcd Pods, BENCHMARKS.md "Compressed cache"), it spends idle
/// CPU (2–17 µs per object written), and it replaces the stored `Arc` of each object once
/// (handlers' objects are not the store's afterwards).
///
/// With mimalloc, freed list buffers leave the resident set only if the allocator purges them
/// while the threads are quiet: set `MIMALLOC_PURGE_DELAY=0` for a long-lived cache (the
/// `informer watch` binary does; with the default delay RSS stayed at 925 MiB instead of
/// 241 MiB for 100 000 HEAD Pods). zstd's dictionary trainer allocates with glibc's `malloc`,
/// megabytes at a time, and glibc keeps what it freed in the training thread's arena unless
/// its `mmap` threshold is fixed: `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072` (the
/// binary sets it too) saved 7.4 MB of RSS, 54 B per cached object at 100 000 etcd Pods.
///
/// [`InformerConfig::compression`]: super::InformerConfig::compression
///
/// # Examples
/// ```
/// use informer::informer::{Compression, ZstdOptions};
/// use informer::InformerConfig;
/// let config = InformerConfig {
///     compression: Compression::Zstd(ZstdOptions { level: 3, ..ZstdOptions::default() }),
///     ..InformerConfig::default()
/// };
/// # drop(config);
/// ```
#[derive(Clone, Debug, Default)]
pub enum Compression {
    /// Objects are kept as received (slices of the received buffers).
    #[default]
    None,
    /// Objects are kept compressed with zstd once the informer is idle.
    Zstd(ZstdOptions),
}

impl Compression {
    /// [`Compression::Zstd`] with [`ZstdOptions::default`].
    pub fn zstd() -> Compression {
        Compression::Zstd(ZstdOptions::default())
    }
}

/// Settings of [`Compression::Zstd`].
#[derive(Clone, Debug)]
pub struct ZstdOptions {
    /// zstd level, 1–19 (default 3: level 1 saves 5–35 % of the compression time and gives
    /// 1.1–2.3× larger frames on the simulator's corpora, `cargo bench --bench compression`).
    /// A given [`dictionary`](Self::dictionary) compresses at its own level instead.
    pub level: i32,
    /// A dictionary to use instead of training one (e.g. one an earlier run trained:
    /// [`Informer::dictionary`](super::Informer::dictionary), [`Dictionary::as_bytes`]); it is
    /// never replaced.
    pub dictionary: Option<Arc<Dictionary>>,
    /// Most objects the dictionary is trained on (default 1 000): the first list's first ones
    /// (a list with fewer trains after the sync, from the cache), spread over the cache for a
    /// retraining; fewer when their bytes reach 100 × [`dictionary_bytes`](Self::dictionary_bytes)
    /// first (at least 16, an object over a sixteenth of that budget cut to it).
    pub train_samples: usize,
    /// Largest dictionary trained, bytes (default 112 KiB, about zstd's own default); smaller
    /// when the samples are (an eighth of their bytes).
    pub dictionary_bytes: usize,
}

impl Default for ZstdOptions {
    fn default() -> Self {
        ZstdOptions {
            level: 3,
            dictionary: None,
            train_samples: 1000,
            dictionary_bytes: 112 * 1024,
        }
    }
}

/// What an informer's cached objects cost ([`Informer::cache_stats`]), counted over one
/// snapshot of the store.
///
/// [`Informer::cache_stats`]: super::Informer::cache_stats
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Objects in the cache.
    pub objects: usize,
    /// Of those, held compressed.
    pub compressed: usize,
    /// Their bytes as received (decompressed), summed.
    pub raw_bytes: u64,
    /// What their bytes take in memory: received bytes, or compressed frames (decoded
    /// metadata and the store's own tables not counted).
    pub cached_bytes: u64,
    /// Size of the dictionary in use, bytes (0 without one).
    pub dictionary_bytes: usize,
}

impl CacheStats {
    /// Counts the objects of `snapshot`.
    pub fn of(snapshot: &Snapshot) -> CacheStats {
        let mut s = CacheStats::default();
        for (_, o) in snapshot.iter() {
            s.objects += 1;
            s.raw_bytes += o.raw_len() as u64;
            s.cached_bytes += o.cached_len() as u64;
            if let Some(d) = o.compressed_with() {
                s.compressed += 1;
                s.dictionary_bytes = s.dictionary_bytes.max(d.len());
            }
        }
        s
    }

    /// `cached_bytes ÷ raw_bytes` (1.0 for an empty cache).
    pub fn ratio(&self) -> f64 {
        if self.raw_bytes == 0 {
            1.0
        } else {
            self.cached_bytes as f64 / self.raw_bytes as f64
        }
    }
}
