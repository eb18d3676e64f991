//! `Compression::Zstd` on the simulator: once idle, the informer's cached objects are compact
//! (trained dictionary, compressed bodies), still equal to the simulator's, typed decodes
//! unchanged, handlers unaffected; writes after that are compressed too; `Compression::None`
//! leaves everything as received.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use informer::informer::{Compression, ZstdOptions};
use informer::object::ObjectMeta;
use informer::reflector::{ApiError, ListOptions, ListerWatcher, WatchOptions, WatchResponse};
use informer::sim::{SimServer, SimWatch};
use informer::{HandlerFns, HandlerOptions, Informer, InformerConfig, Object};
use support::{eventually, sim};

fn config(compression: Compression) -> InformerConfig {
    InformerConfig {
        compression,
        ..Default::default()
    }
}

/// Every cached object equals the simulator's (metadata and bytes).
fn assert_matches_sim<L: ListerWatcher>(informer: &Informer<L>, sim: &informer::sim::SimServer) {
    let ours = informer.store().snapshot();
    let theirs = sim.truth().objects;
    assert_eq!(ours.len(), theirs.len());
    for o in theirs.values() {
        let cached = ours.get(o.key_ref()).expect("cached");
        assert_eq!(cached.meta(), o.meta());
        assert_eq!(cached.raw().unwrap(), o.raw().unwrap(), "{}", o.key());
    }
}

/// Starts `informer` and waits for its sync and, with compression, until all `objects` are
/// compressed.
async fn start_compacted<L: ListerWatcher>(informer: &Informer<L>, objects: usize, zstd: bool) {
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    if zstd {
        let all = || {
            let s = informer.cache_stats();
            s.objects == objects && s.compressed == objects
        };
        assert!(
            eventually(Duration::from_secs(30), all).await,
            "{:?}",
            informer.cache_stats()
        );
    }
}

/// Breaks the watch (410 on its next event), makes `changes` changes, and returns once the
/// informer relisted and applied everything up to the simulator's resourceVersion.
async fn relist_after<L: ListerWatcher>(informer: &Informer<L>, sim: &SimServer, changes: u64) {
    use informer::sim::{Fault, StreamFault};
    sim.inject(Fault::Stream {
        after_events: 0,
        action: StreamFault::Expired,
    });
    sim.flood(changes).await.unwrap();
    let relists = || {
        informer
            .reflector_metrics()
            .unwrap()
            .relists
            .load(Ordering::Relaxed)
    };
    assert!(eventually(Duration::from_secs(30), || relists() >= 1).await);
    informer
        .store()
        .wait_for(sim.resource_version())
        .await
        .unwrap();
    tokio::task::block_in_place(|| informer.flush());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_informer_compresses_its_cache() {
    for name in ["etcd", "head", "json"] {
        let sim = sim(name, |c| {
            c.initial_objects(400)
                .target_objects(400)
                .vary(name != "json")
        });
        let informer = Informer::new(sim.clone(), config(Compression::zstd()));
        let seen = Arc::new(AtomicUsize::new(0));
        let s = seen.clone();
        informer
            .add_event_handler(
                HandlerFns::new().with_add(move |_: &Arc<Object>, _| {
                    s.fetch_add(1, Ordering::Relaxed);
                }),
                HandlerOptions::new(),
            )
            .unwrap();
        informer.start(&tokio::runtime::Handle::current());
        informer
            .wait_for_cache_sync(Duration::from_secs(30))
            .await
            .unwrap();
        let all = |i: &Informer<_>| {
            let s = i.cache_stats();
            s.objects > 0 && s.compressed == s.objects
        };
        assert!(
            eventually(Duration::from_secs(30), || all(&informer)).await,
            "{name}: {:?}",
            informer.cache_stats()
        );
        let stats = informer.cache_stats();
        assert!(stats.dictionary_bytes > 0);
        let dict = informer.dictionary().expect("trained");
        assert_eq!(dict.len(), stats.dictionary_bytes);
        // Saved and loaded again, it decompresses nothing of this run (another id) but
        // compresses as well.
        let again =
            informer::object::Dictionary::from_bytes(dict.as_bytes(), dict.level()).unwrap();
        assert_ne!(again.id(), dict.id());
        assert_eq!(again.len(), dict.len());
        assert!(
            stats.ratio() < 0.3,
            "{name}: {stats:?} ratio {}",
            stats.ratio()
        );
        assert_matches_sim(&informer, &sim);
        assert_eq!(
            seen.load(Ordering::Relaxed),
            400,
            "{name}: one add per object"
        );

        // Changes after the dictionary was trained are compressed once the flood is applied.
        let rv = sim.flood(500).await.unwrap();
        informer.store().wait_for(rv).await.unwrap();
        assert!(
            eventually(Duration::from_secs(30), || all(&informer)).await,
            "{name} after the flood: {:?}",
            informer.cache_stats()
        );
        assert_matches_sim(&informer, &sim);
        if name != "json" {
            let o = informer.store().list().pop().unwrap();
            let pod: k8s_pb::api::core::v1::Pod = o.decode().unwrap();
            assert_eq!(pod.metadata.unwrap().name.as_deref(), Some(o.name()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_compression_objects_stay_as_received() {
    let sim = sim("etcd", |c| c.initial_objects(100).target_objects(100));
    let informer = Informer::new(sim.clone(), config(Compression::None));
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let rv = sim.flood(200).await.unwrap();
    informer.store().wait_for(rv).await.unwrap();
    tokio::task::block_in_place(|| informer.flush());
    let stats = informer.cache_stats();
    assert_eq!(stats.compressed, 0);
    assert_eq!(stats.cached_bytes, stats.raw_bytes);
    assert!((stats.ratio() - 1.0).abs() < 1e-9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_dictionary_is_used_without_training() {
    let sim = sim("etcd", |c| c.initial_objects(50).target_objects(50));
    let sample = sim.truth().objects.values().next().unwrap().raw().unwrap();
    let dict = Arc::new(informer::object::Dictionary::from_bytes(&sample, 3).unwrap());
    let informer = Informer::new(
        sim.clone(),
        config(Compression::Zstd(ZstdOptions {
            dictionary: Some(dict.clone()),
            ..ZstdOptions::default()
        })),
    );
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(30), || informer
            .cache_stats()
            .compressed
            == 50)
        .await
    );
    for o in informer.store().list() {
        assert!(Arc::ptr_eq(o.compressed_with().unwrap(), &dict));
    }
    assert_matches_sim(&informer, &sim);
}

/// A relist after the cache is compacted keeps the stored compact objects of every unchanged
/// key (same `Arc`: nothing decompressed, copied or compressed again) and compacts the changed
/// ones as the list arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_keeps_compacted_objects_and_compacts_the_new_list() {
    let sim = sim("etcd", |c| {
        c.initial_objects(400).target_objects(400).vary(true)
    });
    let informer = Informer::new(sim.clone(), config(Compression::zstd()));
    start_compacted(&informer, 400, true).await;
    let before = informer.store().snapshot();
    relist_after(&informer, &sim, 5).await;
    // Changes that came on the new watch rather than in the list are compacted when idle.
    let all = || {
        let s = informer.cache_stats();
        s.compressed == s.objects
    };
    assert!(eventually(Duration::from_secs(30), all).await);

    let after = informer.store().snapshot();
    let truth = sim.truth().objects;
    let mut kept = 0;
    for (key, o) in after.iter() {
        let expected = &truth[key];
        assert_eq!(o.raw().unwrap(), expected.raw().unwrap());
        if let Some(old) = before.get(key)
            && old.resource_version() == o.resource_version()
        {
            assert!(
                Arc::ptr_eq(old, o),
                "{key}: unchanged, so the stored object is kept"
            );
            kept += 1;
        }
    }
    assert_eq!(after.len(), truth.len());
    assert!(kept >= 390, "{kept} of {} kept", after.len());
}

/// A transform that is not idempotent (appends "x" to annotation `t`) is applied once per
/// object received, with or without compression, relists included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_transforms_each_listed_object_once() {
    for compression in [Compression::None, Compression::zstd()] {
        let zstd = matches!(compression, Compression::Zstd(_));
        let sim = sim("etcd", |c| {
            c.initial_objects(100).target_objects(100).vary(true)
        });
        let informer = Informer::new(
            sim.clone(),
            InformerConfig {
                compression,
                ..Default::default()
            },
        );
        informer
            .set_transform(|o: Arc<Object>| {
                let mut meta = o.meta().to_fields();
                let old = meta
                    .annotations
                    .get("t")
                    .map(|s| s.to_string())
                    .unwrap_or_default();
                meta.annotations
                    .insert("t".into(), format!("{old}x").as_str().into());
                Arc::new(o.with_meta(meta.into()).unwrap())
            })
            .unwrap();
        start_compacted(&informer, 100, zstd).await;
        relist_after(&informer, &sim, 3).await;
        let mut bad = 0;
        for o in informer.store().list() {
            let t = o
                .meta()
                .annotations()
                .get("t")
                .map(|s| s.to_string())
                .unwrap_or_default();
            if t != "x" {
                bad += 1;
            }
        }
        assert_eq!(bad, 0, "zstd={zstd}: objects transformed more than once");
    }
}

/// After an "etcd restore" a server can list objects at the same resourceVersion with other
/// content (new uid, a label): the cache holds what the list says, compressed or not.
struct Restored {
    sim: SimServer,
    rewrite: Arc<AtomicBool>,
}

impl ListerWatcher for Restored {
    type Body = SimWatch;
    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        let body = self.sim.list(opts).await?;
        if !self.rewrite.load(Ordering::SeqCst) {
            return Ok(body);
        }
        let list = informer::object::decode_list(body).unwrap();
        let items: Vec<Object> = list
            .items
            .iter()
            .map(|o| {
                let mut m = o.meta().to_fields();
                m.uid = "00000000-restored".into();
                m.labels.insert("restored".into(), "yes".into());
                o.with_meta(ObjectMeta::from(m)).unwrap()
            })
            .collect();
        let refs: Vec<&Object> = items.iter().collect();
        Ok(informer::object::encode_list_protobuf(
            &list.list_gvk,
            &list.resource_version,
            &list.continue_token,
            list.remaining_item_count,
            &refs,
        )
        .unwrap())
    }
    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        self.sim.watch(opts).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_at_the_same_resource_version_with_other_content_wins() {
    for compression in [Compression::None, Compression::zstd()] {
        let zstd = matches!(compression, Compression::Zstd(_));
        let sim = sim("etcd", |c| {
            c.initial_objects(100).target_objects(100).vary(true)
        });
        let rewrite = Arc::new(AtomicBool::new(false));
        let informer = Informer::new(
            Restored {
                sim: sim.clone(),
                rewrite: rewrite.clone(),
            },
            InformerConfig {
                compression,
                ..Default::default()
            },
        );
        start_compacted(&informer, 100, zstd).await;
        rewrite.store(true, Ordering::SeqCst);
        relist_after(&informer, &sim, 3).await;
        let stale = informer
            .store()
            .list()
            .iter()
            .filter(|o| o.meta().uid() as &str != "00000000-restored")
            .count();
        // Only the few changed after the relist's list (they come on the watch, unrewritten).
        assert!(
            stale <= 3,
            "zstd={zstd}: {stale} objects keep the pre-relist content"
        );
    }
}

/// A lister whose pages after the first wait until `open` is set (the test sets it once the
/// informer has a dictionary, so which pages come after it is not left to timing).
struct GatedPages {
    sim: SimServer,
    open: tokio::sync::watch::Receiver<bool>,
}

impl ListerWatcher for GatedPages {
    type Body = SimWatch;
    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        if opts.continue_token.is_some() {
            let mut open = self.open.clone();
            let _ = open.wait_for(|o| *o).await;
        }
        self.sim.list(opts).await
    }
    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        self.sim.watch(opts).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_list_trains_from_its_first_page_and_arrives_compacted() {
    let sim = sim("etcd", |c| {
        c.initial_objects(3000).target_objects(3000).vary(true)
    });
    let (open, gate) = tokio::sync::watch::channel(false);
    let informer = Informer::new(
        GatedPages {
            sim: sim.clone(),
            open: gate,
        },
        config(Compression::Zstd(ZstdOptions {
            train_samples: 200,
            ..Default::default()
        })),
    );
    let (adds, compact_adds) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a, c) = (adds.clone(), compact_adds.clone());
    informer
        .add_event_handler(
            HandlerFns::new().with_add(move |o: &Arc<Object>, _| {
                a.fetch_add(1, Ordering::Relaxed);
                if o.compressed_with().is_some() {
                    c.fetch_add(1, Ordering::Relaxed);
                }
            }),
            HandlerOptions::new(),
        )
        .unwrap();
    informer.start(&tokio::runtime::Handle::current());
    // The first page (500 objects, more than the 200 samples) trains the dictionary while the
    // list waits for its second page: nothing is synced yet.
    assert!(eventually(Duration::from_secs(30), || informer.dictionary().is_some()).await);
    assert!(!informer.has_synced());
    open.send(true).unwrap();
    start_compacted(&informer, 3000, true).await;
    assert!(
        eventually(Duration::from_secs(30), || adds.load(Ordering::Relaxed)
            == 3000)
        .await
    );
    // Pages 2 to 6 were compacted as they arrived, the first one when the list ended (on the
    // reflector's thread, before the cache took the list): handlers got every object compact.
    assert_eq!(compact_adds.load(Ordering::Relaxed), 3000);
    assert_matches_sim(&informer, &sim);
}
