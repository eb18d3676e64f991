//! The smallest useful controller on `informer`'s default features: it caches the ConfigMaps
//! of one namespace (or all) through the kubeconfig's cluster and prints every change.
//!
//! ```sh
//! cargo run --manifest-path examples/lean-user/Cargo.toml -- [namespace]
//! ```

use std::time::Duration;

use futures_util::StreamExt;
use informer::{Event, HandlerOptions, InformerConfig, KubeInformer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // kubeconfig or in-cluster, as kubectl; kube's own retry layer off, so the informer's
    // reflector sees every 429/5xx and backs off itself, as client-go's does.
    let client = informer::ClientOptions::default().client().await?;
    let api: Api<ConfigMap> = match std::env::args().nth(1) {
        Some(ns) => Api::namespaced(client, &ns),
        None => Api::all(client),
    };
    let config_maps = KubeInformer::from_api(api, InformerConfig::default());
    let mut events = config_maps.events(HandlerOptions::new().name("printer"))?;
    config_maps.start(&tokio::runtime::Handle::current());
    config_maps
        .wait_for_cache_sync(Duration::from_secs(60))
        .await?;
    println!("{} config maps cached", config_maps.lister().list()?.len());
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Added { object, .. }) => println!("added {:?}", object.metadata.name),
            Ok(Event::Updated { new, .. }) => println!("updated {:?}", new.metadata.name),
            Ok(Event::Deleted { object, .. }) => println!("deleted {:?}", object.metadata.name),
            Ok(Event::Synced) => println!("synced"),
            Err(e) => eprintln!("{e}"),
        }
    }
    Ok(())
}
