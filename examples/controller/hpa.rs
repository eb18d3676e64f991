//! A controller in the shape of Kubernetes' HorizontalPodAutoscaler controller
//! (`kubernetes/pkg/controller/podautoscaler/horizontal.go`): shared informers, handlers that
//! put `namespace/name` keys on a rate-limited work queue, workers that reconcile a key from
//! the listers, errors retried with backoff, a drain on shutdown.
//!
//! Used by `examples/controller.rs` and, through `#[path]`, by `tests/controller.rs`.
//!
//! # What it computes
//!
//! For every Deployment, what the HPA's replica calculator reads before it decides on a
//! scale: the desired replicas (`spec.replicas`), the Pods the Deployment owns, and how many of
//! them are ready (the `Ready` condition is `True`, as `podutil.IsPodReady`), tagged with the
//! Deployment's `metadata.generation` it was computed from. (The HPA gets its selector from the
//! scale subresource and its load from the metrics API; neither exists here, so it stops at the
//! counts.) Results are kept in memory ([`Controller::statuses`]) and, with a
//! [`StatusWriter`], written to the Deployment's `status` subresource as the deployment
//! controller keeps it (`observedGeneration`, `replicas`, `updatedReplicas`, `readyReplicas`,
//! `availableReplicas`, `unavailableReplicas`, an `Available` condition), only when it
//! changed, so a write's own watch event does not cause another write.
//!
//! # Pods to Deployments
//!
//! In a real cluster a Deployment `D` owns ReplicaSets named `D-<pod-template-hash>` (the
//! deployment controller's `sync.go` names them so), and each ReplicaSet owns Pods that carry
//! that hash in their `pod-template-hash` label. A Pod's Deployment is therefore read off its
//! metadata alone: the controlling owner reference is an `apps` ReplicaSet whose name is
//! `<deployment>-<the pod's pod-template-hash>`; strip the suffix ([`deployment_of`]). The
//! index [`DEPLOYMENT_INDEX`] on the Pod informer maps each Pod to `namespace/deployment`, so a
//! reconcile finds a Deployment's Pods with one index lookup, and a Pod event enqueues its
//! Deployment's key. What this mapping cannot see: a ReplicaSet adopted by a Deployment under
//! another name (rare: adoption of a hand-made ReplicaSet that matches the selector), and which
//! Deployment *object* (UID) owns the ReplicaSet. A third informer on ReplicaSets, following
//! owner UIDs, would see both, at the cost of caching every ReplicaSet.
//!
//! # Why every handler is `Unbounded`
//!
//! A Pod event enqueues another object's key, and a Deployment can be reconciled because of a
//! Pod. A `CoalesceByKey` listener merges an add and a delete of one key into nothing while it
//! lags; if the Deployment was reconciled in between (triggered by something else) and saw the
//! added Pod, no event would ever correct its count. So both handlers keep every notification
//! (client-go's behaviour); the work queue deduplicates the keys instead.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use informer::client::{ApiResource, HttpListerWatcher};
use informer::distributor::{AddListenerError, HandlerFns};
use informer::factory::{GroupVersionResource, MakeListerWatcher, SharedInformerFactory};
use informer::object::{DecodeError, Object, ObjectKey};
use informer::reflector::ListerWatcher;
use informer::store::{IndexFunc, IndexValues, StoreError, index_func};
use informer::workqueue::{ShutDown, WorkQueue};
use informer::{HandlerOptions, Registration, TypedIndexError, TypedLister};
use k8s_pb::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_pb::api::core::v1::Pod;

/// Name of the Pod index whose values are `namespace/deployment` ([`deployment_index_func`]).
pub(crate) const DEPLOYMENT_INDEX: &str = "deployment";

/// Label the deployment controller puts on a ReplicaSet's Pods: the hash that ends the
/// ReplicaSet's name.
pub(crate) const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// Failures of one key before it is dropped (client-go controllers use 5 to 15).
pub(crate) const MAX_RETRIES: u64 = 5;

/// The Deployment that owns `pod` through its ReplicaSet, as `namespace/name`, read from the
/// Pod's metadata: its controlling owner reference must be a ReplicaSet of the `apps` group
/// (or the retired `extensions`) named `<deployment>-<pod-template-hash label>`. `None` for
/// Pods without such an owner (bare Pods, Pods of Jobs, StatefulSets, DaemonSets, ReplicaSets
/// made by hand and not named that way).
pub(crate) fn deployment_of(pod: &Object) -> Option<ObjectKey> {
    let meta = pod.meta();
    let owner = meta
        .owner_references()
        .find(|o| o.controller == Some(true))?;
    let group = owner.api_version.split_once('/').map_or("", |(g, _)| g);
    if owner.kind != "ReplicaSet" || !matches!(group, "apps" | "extensions") {
        return None;
    }
    let hash = meta.labels().get(POD_TEMPLATE_HASH)?;
    let name = owner.name.strip_suffix(hash)?.strip_suffix('-')?;
    (!name.is_empty()).then(|| ObjectKey::new(meta.namespace(), name))
}

/// The [`DEPLOYMENT_INDEX`] function: one value, the key of [`deployment_of`], or none.
pub(crate) fn deployment_index_func() -> IndexFunc {
    index_func(|obj| {
        Ok(deployment_of(obj)
            .map(|k| k.as_str().to_owned())
            .into_iter()
            .collect::<IndexValues>())
    })
}

/// What a [`SharedInformerFactory`] needs to reach an API server over HTTP through `client`:
/// an [`HttpListerWatcher`] per resource and namespace asked for (protobuf for built-in kinds,
/// as client-go's informers ask).
pub(crate) fn http_lister_watchers(
    client: kube::Client,
) -> impl Fn(&GroupVersionResource, Option<&str>) -> HttpListerWatcher + Send + Sync + 'static {
    move |gvr: &GroupVersionResource, namespace: Option<&str>| {
        // The kind is informational (the wire carries it).
        let resource = ApiResource::new(&gvr.group, &gvr.version, &gvr.resource, "")
            .in_namespace(namespace.unwrap_or(""));
        HttpListerWatcher::new(client.clone(), resource)
    }
}

/// Writes a Deployment (with its new status) to the API server's `status` subresource.
/// The error is the server's message; the key is then retried.
#[derive(Clone)]
pub(crate) struct StatusWriter(pub(crate) Arc<WriteFn>);

/// The function of a [`StatusWriter`].
pub(crate) type WriteFn = dyn Fn(&Deployment) -> Result<(), String> + Send + Sync;

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StatusWriter")
    }
}

/// A [`StatusWriter`] over HTTP: `PUT .../deployments/NAME/status` with a protobuf body
/// (what client-go's typed clients send), from the worker threads through `runtime`.
pub(crate) fn http_status_writer(
    client: kube::Client,
    runtime: tokio::runtime::Handle,
) -> StatusWriter {
    StatusWriter(Arc::new(move |d: &Deployment| {
        let meta = d.metadata.clone().unwrap_or_default();
        let (ns, name) = (
            meta.namespace.unwrap_or_default(),
            meta.name.unwrap_or_default(),
        );
        let body = protobuf_deployment(d).to_vec();
        let req = http::Request::put(format!(
            "/apis/apps/v1/namespaces/{ns}/deployments/{name}/status"
        ))
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .header(
            "accept",
            "application/vnd.kubernetes.protobuf, application/json",
        )
        .body(body)
        .map_err(|e| e.to_string())?;
        // Only the answer's code matters here (its body is the stored object, or a Status, in
        // protobuf). A Deployment deleted (404) or deleted and created again (409: the write
        // carries the cached uid, and is unconditional otherwise) since the cache read is no
        // failure: the events that follow enqueue it again.
        let code = runtime
            .block_on(client.send(req.map(kube::client::Body::from)))
            .map_err(|e| e.to_string())?
            .status();
        match code.as_u16() {
            200..=299 | 404 | 409 => Ok(()),
            other => Err(format!("HTTP {other}")),
        }
    }))
}

/// A [`StatusWriter`] to a simulator of Deployments in this process (its status
/// subresource, as over HTTP).
pub(crate) fn sim_status_writer(sim: informer::sim::SimServer) -> StatusWriter {
    StatusWriter(Arc::new(move |d: &Deployment| {
        let obj = informer::object::decode(protobuf_deployment(d)).map_err(|e| e.to_string())?;
        match sim.replace_object(&obj.key(), &obj, informer::sim::WriteTarget::Status) {
            Ok(_) => Ok(()),
            // As over HTTP: gone or replaced since the cache read.
            Err(informer::reflector::ApiError::Status(s)) if s.code == 404 || s.code == 409 => {
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }))
}

/// A Deployment as a protobuf object body (`k8s\0` envelope).
pub(crate) fn protobuf_deployment(d: &Deployment) -> bytes::Bytes {
    use prost::Message as _;
    let gvk = informer::object::GroupVersionKind::new("apps", "v1", "Deployment");
    informer::object::encode_envelope(&gvk, &d.encode_to_vec())
}

/// The status the deployment controller would write for `s` (no times in the condition, so
/// that an unchanged status compares equal).
pub(crate) fn deployment_status(s: &ScaleStatus) -> DeploymentStatus {
    let (pods, ready) = (s.pods as i32, s.ready as i32);
    let available = ready >= s.desired;
    DeploymentStatus {
        observed_generation: Some(s.generation),
        replicas: Some(pods),
        updated_replicas: Some(pods),
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        unavailable_replicas: Some((s.desired - ready).max(0)),
        conditions: vec![DeploymentCondition {
            r#type: Some("Available".into()),
            status: Some(if available { "True" } else { "False" }.into()),
            reason: Some(
                if available {
                    "MinimumReplicasAvailable"
                } else {
                    "MinimumReplicasUnavailable"
                }
                .into(),
            ),
            message: Some(format!("{ready} of {} replicas ready", s.desired)),
            ..DeploymentCondition::default()
        }],
        ..DeploymentStatus::default()
    }
}

/// Whether the Pod's `Ready` condition is `True` (Kubernetes `podutil.IsPodReady`).
pub(crate) fn is_pod_ready(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.r#type.as_deref() == Some("Ready") && c.status.as_deref() == Some("True"))
    })
}

/// What a reconcile found for one Deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScaleStatus {
    /// The Deployment's `metadata.generation` these counts were computed for.
    pub(crate) generation: i64,
    /// `spec.replicas` (1 when unset, the API's default).
    pub(crate) desired: i32,
    /// Pods owned by the Deployment (through a ReplicaSet), in the cache.
    pub(crate) pods: u32,
    /// Of those, the ready ones.
    pub(crate) ready: u32,
}

/// Why a reconcile failed (the key is retried with backoff, up to [`MAX_RETRIES`] times).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReconcileError {
    /// The cached Deployment does not decode.
    #[error("deployment {key}: {source}")]
    Deployment {
        /// The Deployment's key.
        key: ObjectKey,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// The status could not be written.
    #[error("writing the status of deployment {key}: {message}")]
    Write {
        /// The Deployment's key.
        key: ObjectKey,
        /// The server's answer.
        message: String,
    },
    /// The Deployment's Pods could not be read.
    #[error("pods of deployment {key}: {source}")]
    Pods {
        /// The Deployment's key.
        key: ObjectKey,
        /// Why.
        #[source]
        source: TypedIndexError,
    },
}

/// Why the controller could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    /// The Pod index could not be added.
    #[error("adding the {DEPLOYMENT_INDEX:?} index to the pod informer: {0}")]
    Index(#[from] StoreError),
    /// A handler could not be registered.
    #[error("registering a handler: {0}")]
    Handler(#[from] AddListenerError),
    /// A worker thread could not be started.
    #[error("starting a worker: {0}")]
    Worker(#[from] std::io::Error),
}

/// What happened to one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reconciled {
    /// The Deployment exists: its status now.
    Synced(ScaleStatus),
    /// The Deployment is gone from the cache: its status was dropped.
    Gone,
}

/// Counters of a controller.
#[derive(Debug, Default)]
pub(crate) struct ControllerStats {
    /// Pod notifications (adds, updates, deletes) handled.
    pub(crate) pod_events: AtomicU64,
    /// Deployment notifications handled.
    pub(crate) deployment_events: AtomicU64,
    /// Pod notifications for Pods without a Deployment owner (nothing enqueued).
    pub(crate) unowned_pod_events: AtomicU64,
    /// Pod deletions learnt from a relist (tombstones: the watch missed the DELETED event).
    pub(crate) pod_tombstones: AtomicU64,
    /// Status writes that succeeded.
    pub(crate) status_writes: AtomicU64,
    /// Keys reconciled successfully.
    pub(crate) reconciles: AtomicU64,
    /// Of those, keys with no Deployment in the cache: deleted ones, and those an orphan Pod
    /// (whose Deployment was deleted or never existed) enqueued.
    pub(crate) gone: AtomicU64,
    /// Reconciles that failed.
    pub(crate) errors: AtomicU64,
    /// Keys dropped after [`MAX_RETRIES`] failures.
    pub(crate) dropped: AtomicU64,
}

/// The controller: listers of Deployments and Pods, the queue, the statuses it computed.
#[derive(Debug)]
pub(crate) struct Controller {
    deployments: TypedLister<Deployment>,
    pods: TypedLister<Pod>,
    queue: WorkQueue<ObjectKey>,
    statuses: Mutex<HashMap<ObjectKey, ScaleStatus>>,
    stats: Arc<ControllerStats>,
    registrations: Mutex<Vec<Registration>>,
    writer: Mutex<Option<StatusWriter>>,
}

impl Controller {
    /// Asks `factory` for the Deployment and Pod informers, adds [`DEPLOYMENT_INDEX`] to the
    /// Pod one, and registers the handlers that feed `queue` (as the HPA controller's
    /// constructor does). Start the factory afterwards.
    pub(crate) fn new<L, F>(
        factory: &SharedInformerFactory<L, F>,
        queue: WorkQueue<ObjectKey>,
    ) -> Result<Arc<Self>, SetupError>
    where
        L: ListerWatcher,
        F: MakeListerWatcher<L>,
    {
        let deployments = factory.informer::<Deployment>();
        let pods = factory.informer::<Pod>();
        pods.informer()
            .add_indexers([(DEPLOYMENT_INDEX.to_owned(), deployment_index_func())])?;
        let controller = Arc::new(Controller {
            deployments: deployments.lister(),
            pods: pods.lister(),
            queue,
            statuses: Mutex::new(HashMap::new()),
            stats: Arc::default(),
            registrations: Mutex::new(Vec::new()),
            writer: Mutex::new(None),
        });

        let (queue, stats) = (controller.queue.clone(), controller.stats.clone());
        let on_deployment = move |obj: &Object| {
            stats.deployment_events.fetch_add(1, Ordering::Relaxed);
            queue.add(obj.key());
        };
        let (add, update, delete) = (on_deployment.clone(), on_deployment.clone(), on_deployment);
        let d = deployments.informer().add_event_handler(
            HandlerFns::new()
                .with_add(move |obj, _| add(obj))
                .with_update(move |_, new| update(new))
                .with_delete(move |obj| delete(obj.object())),
            HandlerOptions::new().name("hpa-deployments"),
        )?;

        let (queue, stats) = (controller.queue.clone(), controller.stats.clone());
        let on_pod = move |old: Option<&Object>, obj: &Object| {
            stats.pod_events.fetch_add(1, Ordering::Relaxed);
            let key = deployment_of(obj);
            // A Pod whose owner changed (adoption, release) also touches the old one.
            if let Some(old) = old
                .and_then(deployment_of)
                .filter(|o| Some(o) != key.as_ref())
            {
                queue.add(old);
            }
            match key {
                Some(key) => queue.add(key),
                None => {
                    stats.unowned_pod_events.fetch_add(1, Ordering::Relaxed);
                }
            }
        };
        let (add, update, delete) = (on_pod.clone(), on_pod.clone(), on_pod);
        let tombstones = controller.stats.clone();
        let p = pods.informer().add_event_handler(
            HandlerFns::new()
                .with_add(move |obj, _| add(None, obj))
                .with_update(move |old, new| update(Some(old), new))
                .with_delete(move |obj| {
                    if obj.is_tombstone() {
                        tombstones.pod_tombstones.fetch_add(1, Ordering::Relaxed);
                    }
                    delete(None, obj.object());
                }),
            HandlerOptions::new().name("hpa-pods"),
        )?;
        controller
            .registrations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend([d, p]);
        Ok(controller)
    }

    /// Makes reconciles write the statuses they compute through `writer` (before the
    /// workers start).
    pub(crate) fn set_status_writer(&self, writer: StatusWriter) {
        *self.writer.lock().unwrap_or_else(PoisonError::into_inner) = Some(writer);
    }

    /// Whether every handler has handled its informer's initial list.
    #[cfg_attr(not(test), allow(dead_code))] // used by tests/controller.rs
    pub(crate) fn handlers_synced(&self) -> bool {
        self.registrations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .all(Registration::has_synced)
    }

    /// The queue keys go through.
    pub(crate) fn queue(&self) -> &WorkQueue<ObjectKey> {
        &self.queue
    }

    /// Counters.
    pub(crate) fn stats(&self) -> &ControllerStats {
        &self.stats
    }

    /// A copy of every status computed, by Deployment key.
    pub(crate) fn statuses(&self) -> HashMap<ObjectKey, ScaleStatus> {
        self.statuses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Reconciles one Deployment from the caches (the HPA's `reconcileKey`): gone from the
    /// cache → its status is dropped; else its Pods are found through [`DEPLOYMENT_INDEX`]
    /// and counted.
    ///
    /// # Errors
    /// [`ReconcileError`] when a cached object does not decode.
    pub(crate) fn reconcile(&self, key: &ObjectKey) -> Result<Reconciled, ReconcileError> {
        let deployment = self
            .deployments
            .get(key.namespace(), key.name())
            .map_err(|source| ReconcileError::Deployment {
                key: key.clone(),
                source,
            })?;
        let Some(deployment) = deployment else {
            self.statuses
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(key);
            return Ok(Reconciled::Gone);
        };
        let pods = self
            .pods
            .by_index(DEPLOYMENT_INDEX, key.as_str())
            .map_err(|source| ReconcileError::Pods {
                key: key.clone(),
                source,
            })?;
        let status = ScaleStatus {
            generation: deployment
                .metadata
                .as_ref()
                .and_then(|m| m.generation)
                .unwrap_or(0),
            desired: deployment
                .spec
                .as_ref()
                .and_then(|s| s.replicas)
                .unwrap_or(1),
            pods: pods.len() as u32,
            ready: pods.iter().filter(|p| is_pod_ready(p)).count() as u32,
        };
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(write) = writer {
            let want = deployment_status(&status);
            if deployment.status.as_ref() != Some(&want) {
                let mut d = Deployment::clone(&deployment);
                d.status = Some(want);
                // The controller owns this status: an unconditional update (no
                // resourceVersion), so a flood's concurrent spec change does not make it retry.
                if let Some(m) = d.metadata.as_mut() {
                    m.resource_version = None;
                }
                (write.0)(&d).map_err(|message| ReconcileError::Write {
                    key: key.clone(),
                    message,
                })?;
                self.stats.status_writes.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.statuses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), status);
        Ok(Reconciled::Synced(status))
    }

    /// Takes one key, reconciles it, and either forgets it (success) or retries it with the
    /// queue's rate limiter (failure; dropped after [`MAX_RETRIES`]), then marks it done (the
    /// HPA's `processNextWorkItem`). Blocks while the queue is empty.
    ///
    /// # Errors
    /// [`ShutDown`] once the queue is shut down and drained: the worker should return.
    pub(crate) fn process_next(&self) -> Result<(), ShutDown> {
        let key = self.queue.get()?;
        match self.reconcile(&key) {
            Ok(r) => {
                self.stats.reconciles.fetch_add(1, Ordering::Relaxed);
                if r == Reconciled::Gone {
                    self.stats.gone.fetch_add(1, Ordering::Relaxed);
                }
                self.queue.forget(&key);
            }
            Err(e) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                if self.queue.num_requeues(&key) < MAX_RETRIES {
                    eprintln!("reconcile {key}: {e} (retrying)");
                    self.queue.add_rate_limited(key.clone());
                } else {
                    eprintln!("reconcile {key}: {e} (dropped after {MAX_RETRIES} retries)");
                    self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    self.queue.forget(&key);
                }
            }
        }
        self.queue.done(&key);
        Ok(())
    }

    /// Starts `n` worker threads, each looping on [`process_next`](Self::process_next) until
    /// the queue shuts down. Start them once the caches have synced
    /// (`wait_for_cache_sync`), as the HPA controller does: a reconcile against a partial
    /// cache would compute partial counts.
    ///
    /// # Errors
    /// When a thread cannot be spawned (the queue is then shut down, and the threads already
    /// started end).
    pub(crate) fn start_workers(self: &Arc<Self>, n: usize) -> Result<Workers, SetupError> {
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let c = self.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("hpa-worker-{i}"))
                .spawn(move || while c.process_next().is_ok() {});
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    self.queue.shutdown();
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(e.into());
                }
            }
        }
        Ok(Workers { threads })
    }
}

/// The worker threads of a controller.
#[derive(Debug)]
pub(crate) struct Workers {
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Waits for every worker to return (after the queue shut down). Returns how many
    /// panicked.
    pub(crate) fn join(self) -> usize {
        self.threads
            .into_iter()
            .map(JoinHandle::join)
            .filter(Result::is_err)
            .count()
    }
}
