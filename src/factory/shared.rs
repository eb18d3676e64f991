//! [`SharedInformerFactory`]: the informers of a process, one per resource.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;

use super::filtered::{Filtered, Filters, RequestOptions};
use super::resource::{GroupVersionResource, Resource, Scope};
use super::typed::TypedInformer;
use crate::informer::{CENTURY, CacheSyncError, Informer, InformerConfig, TypedLister};
use crate::reflector::ListerWatcher;

/// Makes the lister-watcher of one resource: `(resource, namespace)`, the namespace `None` for
/// all namespaces (and always for cluster-scoped kinds).
pub trait MakeListerWatcher<L>: Fn(&GroupVersionResource, Option<&str>) -> L + Send + Sync {}

impl<L, F: Fn(&GroupVersionResource, Option<&str>) -> L + Send + Sync> MakeListerWatcher<L> for F {}

struct Slot<L: ListerWatcher> {
    informer: Arc<Informer<Filtered<L>>>,
    /// The shared `TypedLister<K>` of this resource, once a typed caller asked.
    typed: Option<Box<dyn Any + Send + Sync>>,
}

struct State<L: ListerWatcher> {
    informers: HashMap<GroupVersionResource, Slot<L>>,
    shut_down: bool,
}

/// One informer per resource, shared by every caller (client-go `SharedInformerFactory`).
///
/// # Examples
/// ```no_run
/// # async fn demo(sim: informer::sim::SimServer) {
/// use std::time::Duration;
/// use informer::factory::SharedInformerFactory;
/// use k8s_pb::api::core::v1::Pod;
///
/// let factory = SharedInformerFactory::new(move |_gvr, _ns| sim.clone())
///     .namespace("default")
///     .label_selector("app=web");
/// let pods = factory.informer::<Pod>();
/// factory.start(&tokio::runtime::Handle::current());
/// factory.wait_for_cache_sync(Duration::from_secs(30)).await;
/// let web = pods.lister().namespace("default").list();
/// # drop(web);
/// factory.shutdown();
/// # }
/// ```
pub struct SharedInformerFactory<L: ListerWatcher, F> {
    make: F,
    namespace: Option<String>,
    filters: Filters,
    config: InformerConfig,
    state: Mutex<State<L>>,
}

impl<L: ListerWatcher, F> fmt::Debug for SharedInformerFactory<L, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut resources: Vec<String> = state.informers.keys().map(|g| g.to_string()).collect();
        resources.sort();
        f.debug_struct("SharedInformerFactory")
            .field("namespace", &self.namespace)
            .field("label_selector", &self.filters.label_selector)
            .field("field_selector", &self.filters.field_selector)
            .field("resources", &resources)
            .field("shut_down", &state.shut_down)
            .finish_non_exhaustive()
    }
}

impl<L: ListerWatcher, F: MakeListerWatcher<L>> SharedInformerFactory<L, F> {
    /// A factory making each resource's lister-watcher with `make(resource, namespace)`.
    pub fn new(make: F) -> Self {
        SharedInformerFactory {
            make,
            namespace: None,
            filters: Filters::default(),
            config: InformerConfig::default(),
            state: Mutex::new(State {
                informers: HashMap::new(),
                shut_down: false,
            }),
        }
    }

    /// Only this namespace (client-go `WithNamespace`); cluster-scoped kinds ignore it.
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// `labelSelector` on every list and watch.
    #[must_use]
    pub fn label_selector(mut self, selector: &str) -> Self {
        self.filters.label_selector = Some(selector.to_owned());
        self
    }

    /// `fieldSelector` on every list and watch.
    #[must_use]
    pub fn field_selector(mut self, selector: &str) -> Self {
        self.filters.field_selector = Some(selector.to_owned());
        self
    }

    /// A hook run on every list's and watch's options (client-go `WithTweakListOptions`).
    #[must_use]
    pub fn tweak_list_options(
        mut self,
        tweak: impl Fn(RequestOptions<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.filters.tweak = Some(Arc::new(tweak));
        self
    }

    /// Resync period of handlers registered without one (client-go `defaultResync`).
    #[must_use]
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.config.default_resync = period;
        self
    }

    /// Store, reflector and batching settings of every informer it makes.
    #[must_use]
    pub fn informer_config(mut self, config: InformerConfig) -> Self {
        let resync = self.config.default_resync;
        self.config = config;
        if self.config.default_resync.is_zero() {
            self.config.default_resync = resync;
        }
        self
    }

    fn state(&self) -> MutexGuard<'_, State<L>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot<'s>(
        &self,
        state: &'s mut State<L>,
        gvr: &GroupVersionResource,
        namespaced: bool,
    ) -> &'s mut Slot<L> {
        state.informers.entry(gvr.clone()).or_insert_with(|| {
            let ns = if namespaced {
                self.namespace.as_deref()
            } else {
                None
            };
            let lw = Filtered {
                inner: (self.make)(gvr, ns),
                filters: self.filters.clone(),
            };
            let mut config = self.config.clone();
            if config.name.is_none() {
                config.name = Some(lw.describe());
            }
            Slot {
                informer: Arc::new(Informer::new(lw, config)),
                typed: None,
            }
        })
    }

    /// The shared informer of `gvr` (dynamic: any resource, custom ones included), made on
    /// first use (client-go `ForResource` / `InformerFor`). Not started: call
    /// [`start`](Self::start) after asking for every informer needed.
    ///
    /// The scope of `gvr` is unknown here, so the factory's [`namespace`](Self::namespace)
    /// is passed on as for a namespaced resource (as client-go's dynamic factory does): ask
    /// for cluster-scoped resources from a factory without a namespace. Whoever asks for a
    /// resource first decides this; a later [`informer`](Self::informer) call for a
    /// cluster-scoped kind gets the same informer.
    pub fn informer_for(&self, gvr: &GroupVersionResource) -> Arc<Informer<Filtered<L>>> {
        let mut state = self.state();
        self.slot(&mut state, gvr, true).informer.clone()
    }

    /// The shared informer of kind `K` with its typed lister (client-go
    /// `factory.Apps().V1().Deployments()`).
    pub fn informer<K: Resource>(&self) -> TypedInformer<K, L> {
        self.typed(
            &GroupVersionResource::of::<K>(),
            K::NAMESPACED,
            TypedLister::<K>::new,
        )
    }

    /// The shared informer of a serde kind `K` (a k8s-openapi kind, a `#[derive(CustomResource)]`
    /// struct), its group, version, plural and scope taken from `K`'s `kube::Resource`, with a
    /// typed lister that deserializes JSON objects. Its lister-watcher must ask for JSON: the
    /// factories of [`SharedInformerFactory::from_client`] do; over protobuf objects reads
    /// fail with [`DecodeError::NotJson`](crate::object::DecodeError::NotJson).
    pub fn serde_informer<K>(&self) -> TypedInformer<K, L>
    where
        K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned + Send + Sync + 'static,
        K::Scope: Scope,
    {
        let gvr = GroupVersionResource::new(&K::group(&()), &K::version(&()), &K::plural(&()));
        self.typed(
            &gvr,
            <K::Scope as Scope>::NAMESPACED,
            TypedLister::<K>::serde,
        )
    }

    fn typed<K: Send + Sync + 'static>(
        &self,
        gvr: &GroupVersionResource,
        namespaced: bool,
        make: fn(crate::informer::Lister) -> TypedLister<K>,
    ) -> TypedInformer<K, L> {
        let mut state = self.state();
        let slot = self.slot(&mut state, gvr, namespaced);
        let informer = slot.informer.clone();
        let lister = match slot
            .typed
            .as_ref()
            .and_then(|t| t.downcast_ref::<TypedLister<K>>())
        {
            Some(l) => l.clone(),
            None => {
                let l = make(informer.lister());
                slot.typed = Some(Box::new(l.clone()));
                l
            }
        };
        TypedInformer::from_parts(informer, lister)
    }

    /// Starts every informer not started yet on `handle` (client-go `Start`). Informers asked
    /// for later need another call. Does nothing after [`shutdown`](Self::shutdown).
    ///
    /// # Panics
    /// As [`Informer::start`]: when an informer's processing thread cannot be spawned.
    pub fn start(&self, handle: &Handle) {
        let state = self.state();
        if state.shut_down {
            return;
        }
        for slot in state.informers.values() {
            slot.informer.start(handle);
        }
    }

    fn started(&self) -> Vec<(GroupVersionResource, Arc<Informer<Filtered<L>>>)> {
        self.state()
            .informers
            .iter()
            .filter(|(_, s)| s.informer.is_started())
            .map(|(g, s)| (g.clone(), s.informer.clone()))
            .collect()
    }

    /// Waits until every started informer has synced, up to `timeout` in all (tokio's clock)
    /// (client-go `WaitForCacheSync`). No polling. Under paused tokio time see
    /// [`Informer::wait_for_cache_sync`] (`# Paused time`).
    ///
    /// # Errors
    /// [`CacheSyncError`] naming every informer that had not synced (by
    /// [`Informer::name`]: its resource and selectors unless configured).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> Result<(), CacheSyncError> {
        let now = tokio::time::Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or(now + CENTURY);
        let mut failed = Vec::new();
        for (_, informer) in self.started() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if let Err(e) = informer.wait_for_cache_sync(left).await {
                failed.push(e);
            }
        }
        merge(failed)
    }

    /// [`wait_for_cache_sync`](Self::wait_for_cache_sync) for threads outside async code
    /// (std clock).
    ///
    /// # Errors
    /// As [`wait_for_cache_sync`](Self::wait_for_cache_sync).
    pub fn wait_for_cache_sync_blocking(&self, timeout: Duration) -> Result<(), CacheSyncError> {
        let now = std::time::Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or(now + CENTURY);
        let failed = self
            .started()
            .into_iter()
            .filter_map(|(_, informer)| {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                informer.wait_for_cache_sync_blocking(left).err()
            })
            .collect();
        merge(failed)
    }

    /// The resources of the started informers, each with whether it has synced.
    pub fn sync_status(&self) -> HashMap<GroupVersionResource, bool> {
        self.started()
            .into_iter()
            .map(|(gvr, i)| (gvr, i.has_synced()))
            .collect()
    }

    /// Stops every informer and waits for their threads and for any poll of their tasks in
    /// progress, so no informer makes a request after it returns (client-go `Shutdown`, which
    /// waits for its goroutines); later [`start`](Self::start) calls do nothing. The
    /// exception (a call from inside an informer's own task poll) and the blocking rules are
    /// those of [`Informer::shutdown`].
    pub fn shutdown(&self) {
        for i in self.stop_all() {
            i.shutdown();
        }
    }

    /// [`shutdown`](Self::shutdown) for async code: each informer's
    /// [`Informer::shutdown_async`], so no runtime worker blocks.
    pub async fn shutdown_async(&self) {
        for i in self.stop_all() {
            i.shutdown_async().await;
        }
    }

    /// Marks the factory shut down; its informers.
    fn stop_all(&self) -> Vec<Arc<Informer<Filtered<L>>>> {
        let informers: Vec<_> = {
            let mut state = self.state();
            state.shut_down = true;
            state
                .informers
                .values()
                .map(|s| s.informer.clone())
                .collect()
        };
        informers
    }
}

fn merge(failed: Vec<CacheSyncError>) -> Result<(), CacheSyncError> {
    if failed.is_empty() {
        return Ok(());
    }
    let stopped = failed.iter().any(CacheSyncError::stopped);
    let names = failed
        .iter()
        .flat_map(|e| e.not_synced().iter().cloned())
        .collect();
    Err(CacheSyncError::new(names, stopped))
}

// No `Drop`: dropping the factory drops only its own references. An informer handed out
// (a `TypedInformer`, an `Arc<Informer>`) runs until it is shut down or its last reference goes
// (`Informer`'s own drop shuts it down), as client-go's informers outlive their factory.
