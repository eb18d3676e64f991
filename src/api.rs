//! Starting informers from the `kube` crate: a [`TypedInformer`] from a `kube::Api<K>`, a
//! [`SharedInformerFactory`] from a `kube::Client`, for any kube-rs type (k8s-openapi kinds,
//! `#[derive(CustomResource)]` structs).
//!
//! These informers ask the server for JSON and read objects with serde, once per object
//! version: k8s-openapi types are serde types, and a protobuf object has no serde form
//! without its schema (k8s-pb's prost types, read through [`TypedLister::new`], are the
//! protobuf path; the choice is measured in BENCHMARKS.md, "Typed reads").

use crate::client::{ApiResource, HttpListerWatcher};
use crate::factory::{Filtered, GroupVersionResource, SharedInformerFactory, TypedInformer};
use crate::informer::{Informer, InformerConfig, TypedLister};

/// What a [`KubeInformerFactory`] makes each resource's lister-watcher with.
pub type MakeHttpListerWatcher =
    Box<dyn Fn(&GroupVersionResource, Option<&str>) -> HttpListerWatcher + Send + Sync>;

/// A [`SharedInformerFactory`] over a `kube::Client` ([`SharedInformerFactory::from_client`]).
pub type KubeInformerFactory = SharedInformerFactory<HttpListerWatcher, MakeHttpListerWatcher>;

/// A [`TypedInformer`] over a `kube::Api<K>` ([`TypedInformer::from_api`]).
pub type KubeInformer<K> = TypedInformer<K, HttpListerWatcher>;

impl<K> TypedInformer<K, HttpListerWatcher>
where
    K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    /// An informer of `api`'s resource, in `api`'s namespace (all namespaces for `Api::all`),
    /// through `api`'s client, asking for JSON and reading objects as `K`. Nothing runs until
    /// [`Informer::start`].
    ///
    /// The client is used as given: a client built by `kube::Client::try_default` retries
    /// 429s and 5xx itself before the reflector sees them; build it from a `kube::Config` with
    /// `default_retry = false` (or with [`ClientOptions`](crate::client::ClientOptions)) to
    /// leave retries to the reflector, as client-go does.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use informer::{InformerConfig, KubeInformer};
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kube::Api;
    ///
    /// let client = informer::ClientOptions::default().client().await?; // no kube retry layer
    /// let pods = KubeInformer::from_api(Api::<Pod>::namespaced(client, "default"), InformerConfig::default());
    /// pods.start(&tokio::runtime::Handle::current());
    /// pods.wait_for_cache_sync(Duration::from_secs(30)).await?;
    /// let web: Option<std::sync::Arc<Pod>> = pods.lister().get("default", "web-0")?;
    /// # drop(web);
    /// # Ok(()) }
    /// ```
    pub fn from_api(api: kube::Api<K>, config: InformerConfig) -> Self {
        let mut resource = ApiResource::of::<K>();
        if let Some(ns) = api.namespace() {
            resource = resource.in_namespace(ns);
        }
        let lw = HttpListerWatcher::new(api.into_client(), resource);
        let informer = Informer::new(Filtered::unfiltered(lw), config);
        let lister = TypedLister::serde(informer.lister());
        TypedInformer::from_parts(std::sync::Arc::new(informer), lister)
    }
}

impl KubeInformerFactory {
    /// A factory whose informers list and watch through `client`, asking for JSON (for
    /// [`serde_informer`](SharedInformerFactory::serde_informer) and
    /// [`informer_for`](SharedInformerFactory::informer_for); for k8s-pb kinds over protobuf
    /// make the factory with [`SharedInformerFactory::new`] and an [`HttpListerWatcher`] per
    /// resource).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use informer::SharedInformerFactory;
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
    ///
    /// let client = informer::ClientOptions::default().client().await?; // no kube retry layer
    /// let factory = SharedInformerFactory::from_client(client).namespace("default");
    /// let pods = factory.serde_informer::<Pod>();
    /// let deployments = factory.serde_informer::<Deployment>();
    /// factory.start(&tokio::runtime::Handle::current());
    /// factory.wait_for_cache_sync(Duration::from_secs(30)).await?;
    /// println!("{} pods, {} deployments", pods.lister().list()?.len(), deployments.lister().list()?.len());
    /// # Ok(()) }
    /// ```
    pub fn from_client(client: kube::Client) -> Self {
        SharedInformerFactory::new(Box::new(
            move |gvr: &GroupVersionResource, namespace: Option<&str>| {
                let resource = ApiResource::new(&gvr.group, &gvr.version, &gvr.resource, "")
                    .with_protobuf(false)
                    .in_namespace(namespace.unwrap_or(""));
                HttpListerWatcher::new(client.clone(), resource)
            },
        ) as MakeHttpListerWatcher)
    }
}

#[cfg(test)]
mod tests {
    use crate::factory::Scope;
    use k8s_openapi::api::core::v1::{Namespace, Pod};

    #[test]
    fn scopes_come_from_the_kube_type() {
        const { assert!(<<Pod as kube::Resource>::Scope as Scope>::NAMESPACED) };
        const { assert!(!<<Namespace as kube::Resource>::Scope as Scope>::NAMESPACED) };
    }
}
