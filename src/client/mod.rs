//! The HTTP side of a [`ListerWatcher`](crate::reflector::ListerWatcher): list and watch any
//! resource of a real API server (built-in kinds by group/version/resource, custom resources,
//! namespaced or cluster-scoped, with label and field selectors) through the `kube` crate's
//! client, which brings kubeconfig, in-cluster config, TLS, bearer tokens and exec plugins.
//! Upstream: `client-go/tools/cache/listwatch.go`, `client-go/rest/request.go`.
//!
//! Built-in kinds are asked for protobuf first (`Accept: application/vnd.kubernetes.protobuf,
//! application/json`), custom resources for JSON; whichever the server answers is decoded.
//! Watch bodies are handed to the reflector chunk by chunk as hyper receives them. Each chunk
//! is a slice of hyper's read buffer, so the watch decoder copies events under a quarter of
//! that buffer's largest size out of it ([`SHARED_BUFFER_SPAN`](crate::object::SHARED_BUFFER_SPAN))
//! and slices larger ones.
//!
//! # Examples
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use informer::client::{ApiResource, ClientOptions, HttpListerWatcher};
//! use informer::{Informer, InformerConfig};
//! let client = ClientOptions::default().client().await?;
//! let pods = HttpListerWatcher::new(client, ApiResource::core("v1", "pods", "Pod"));
//! let informer = Informer::new(pods, InformerConfig::default());
//! informer.start(&tokio::runtime::Handle::current());
//! # Ok(()) }
//! ```

mod config;
mod discovery;
mod http;
mod resource;
mod status;

pub use config::{ClientError, ClientOptions};
pub use discovery::{DiscoveredResource, DiscoveryError, discover};
pub use http::{DEFAULT_MAX_LIST_BYTES, HttpListerWatcher, HttpWatchBody, watch_format};
pub use resource::{ApiResource, is_builtin_group};
