//! [`TypedInformer`]: a shared informer with the typed lister of one kind.

use std::fmt;
use std::sync::Arc;

use super::filtered::Filtered;
use crate::distributor::AddListenerError;
use crate::informer::{EventStream, HandlerOptions, Informer, TypedLister};
use crate::reflector::ListerWatcher;

/// An informer and its typed lister for kind `K` (client-go's generated `DeploymentInformer`):
/// from a factory ([`SharedInformerFactory::informer`](super::SharedInformerFactory::informer) for k8s-pb kinds,
/// [`SharedInformerFactory::serde_informer`](super::SharedInformerFactory::serde_informer) for k8s-openapi and `CustomResource` kinds), or
/// alone from a `kube::Api<K>` ([`TypedInformer::from_api`]). Derefs to the [`Informer`]
/// (handlers, start, sync, shutdown).
pub struct TypedInformer<K, L: ListerWatcher> {
    informer: Arc<Informer<Filtered<L>>>,
    lister: TypedLister<K>,
}

impl<K, L: ListerWatcher> Clone for TypedInformer<K, L> {
    fn clone(&self) -> Self {
        TypedInformer {
            informer: self.informer.clone(),
            lister: self.lister.clone(),
        }
    }
}

impl<K, L: ListerWatcher> fmt::Debug for TypedInformer<K, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedInformer")
            .field("informer", &self.informer)
            .field("lister", &self.lister)
            .finish()
    }
}

impl<K: Send + Sync + 'static, L: ListerWatcher> TypedInformer<K, L> {
    pub(crate) fn from_parts(informer: Arc<Informer<Filtered<L>>>, lister: TypedLister<K>) -> Self {
        TypedInformer { informer, lister }
    }

    /// The shared (dynamic) informer: handlers, store, sync.
    pub fn informer(&self) -> &Arc<Informer<Filtered<L>>> {
        &self.informer
    }

    /// Typed reads, decoded once per object version and shared by every caller of this kind.
    pub fn lister(&self) -> TypedLister<K> {
        self.lister.clone()
    }

    /// The informer's changes as typed events with errors (kube-runtime `watcher` shape):
    /// [`Informer::events`] with this informer's lister.
    ///
    /// # Errors
    /// As [`Informer::add_stream`].
    pub fn events(&self, options: HandlerOptions) -> Result<EventStream<K>, AddListenerError> {
        self.informer.events(self.lister.clone(), options)
    }
}

impl<K, L: ListerWatcher> std::ops::Deref for TypedInformer<K, L> {
    type Target = Informer<Filtered<L>>;

    fn deref(&self) -> &Self::Target {
        &self.informer
    }
}
