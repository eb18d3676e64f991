//! [`SharedInformerFactory`]: one informer per resource, shared by every controller of a
//! process (client-go `informers/factory.go`, `sharedInformerFactory`; the dynamic one in
//! `dynamic/dynamicinformer/informer.go`).
//!
//! The factory does not know how to reach an API server: it is given a closure that makes a
//! [`ListerWatcher`](crate::reflector::ListerWatcher) for a [`GroupVersionResource`] (and namespace). The embedded simulator
//! fits today; an HTTP client fits the same way. Filters (namespace, label and field
//! selectors, a tweak hook) are applied to every list and watch by wrapping that lister-watcher
//! in [`Filtered`].
//!
//! Informers are *dynamic*: every object is an [`Object`](crate::object::Object) whatever its
//! kind, custom resources included ([`SharedInformerFactory::informer_for`]). The typed face
//! ([`SharedInformerFactory::informer`]) adds a [`TypedLister`](crate::TypedLister) for any k8s-pb kind.
//!
//! No hidden runtime: [`SharedInformerFactory::start`] takes the tokio [`Handle`](tokio::runtime::Handle) the
//! informers' reflectors and resync tasks run on.

mod filtered;
mod resource;
mod shared;
mod typed;

pub use filtered::{Filtered, RequestOptions, TweakOptions};
pub use resource::{GroupVersionResource, Resource, Scope};
pub use shared::{MakeListerWatcher, SharedInformerFactory};
pub use typed::TypedInformer;
