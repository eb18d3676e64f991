//! A client no one here wrote: kube-rs's `kube_runtime::watcher` + `reflector` (JSON, typed
//! `k8s_openapi` Pods) against our server, through a flood that expires its watches (410) and
//! makes it relist. At the end its store holds exactly the server's objects.

mod support;
mod views;

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube_runtime::{WatchStreamExt, reflector, watcher};
use support::{eventually, runtime, sim, start};
use views::{ViewMap, meta_view};

fn versions(store: &reflector::Store<Pod>) -> ViewMap {
    meta_view(store.state().iter().map(|p| &p.metadata))
}

#[test]
fn kube_runtime_reflector_matches_the_server_after_relists() {
    let rt = runtime();
    // A 200-event window under 8 000-event bursts: kube-rs's watches expire (ERROR 410) and
    // it relists; small pages exercise its paginated lists.
    let sim = sim("head", |c| {
        c.initial_objects(200)
            .target_objects(200)
            .history_window(200)
            .max_page_size(Some(50))
    });
    let server = rt.block_on(start(&sim));
    let url = server.url();
    let (store, relists) = rt.block_on(async {
        let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        let api: Api<Pod> = Api::all(client);
        let (reader, writer) = reflector::store();
        let relists = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = relists.clone();
        let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let errs = errors.clone();
        let stream = watcher(api, watcher::Config::default().page_size(50))
            .default_backoff()
            .reflect(writer)
            .for_each(move |ev| {
                match ev {
                    Ok(watcher::Event::Init) => {
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(e) => errs.lock().unwrap().push(e.to_string()),
                    Ok(_) => {}
                }
                async {}
            });
        tokio::spawn(stream);
        reader.wait_until_ready().await.unwrap();
        assert_eq!(reader.state().len(), 200);
        for _ in 0..4 {
            sim.step(2_000).unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sim.flood(500).await.unwrap();
        let truth = sim.truth();
        let ok = eventually(Duration::from_secs(90), || {
            truth.diff(&versions(&reader)).is_none()
        })
        .await;
        assert!(
            ok,
            "{:?}; kube-rs errors: {:?}",
            truth.diff(&versions(&reader)),
            errors.lock().unwrap().iter().take(5).collect::<Vec<_>>()
        );
        (reader, relists)
    });
    let inits = relists.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        inits >= 2,
        "kube-rs listed {inits} times: the 410s should have made it relist"
    );
    assert_eq!(store.state().len(), sim.truth().objects.len());
    rt.block_on(server.shutdown());
}
