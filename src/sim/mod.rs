//! An in-process simulated Kubernetes API server for one resource: the other side of a
//! [`ListerWatcher`](crate::reflector::ListerWatcher), used by `informer flood`, the tests and
//! the benches.
//!
//! [`SimServer`] holds objects stamped from real fixtures ([`Templates`]), serves list pages
//! and watch streams as the bytes a real API server sends (protobuf or JSON), generates floods
//! of changes ([`SimServer::step`], [`SimServer::flood`]) and misbehaves on demand ([`Fault`],
//! [`SimConfig`]). Everything is deterministic for a [`SimConfig::seed`]. [`SimServer`] says
//! what matches a real API server and what does not.

mod app_rests;
mod codec;
mod config;
mod continue_token;
mod drive_state;
mod driver;
mod error;
mod fault;
mod list;
mod oversized;
mod request;
mod rest;
mod rng;
mod server;
mod shared;
mod state;
pub(crate) mod status;
mod templates;
mod truth;
mod validate;
mod variants;
mod vary;
mod watch;
mod write;

pub use config::{FloodMix, SimConfig};
pub use drive_state::DriveState;
pub use error::SimError;
pub use fault::{ErrorAnswer, Fault, OVERSIZED_DEFAULT, ParseFaultError, StreamFault};
pub use request::{RequestKind, SimRequest};
pub(crate) use rest::Rest;
pub use server::{SimServer, SimStats};
pub use templates::{
    ETCD_POD, HEAD_DEPLOYMENT, HEAD_POD, OPENSHIFT_PODS, Templates, default_fixtures_dir,
};
pub use truth::{Truth, diff_views};
pub(crate) use validate::validate;
pub use variants::{DEPLOYMENT_REPLICAS, ETCD_POD_JSON, HEAD_DEPLOYMENT_JSON, POD_STATES};
pub use watch::SimWatch;
pub use write::{Preconditions, WriteTarget};

#[cfg(feature = "server")]
pub(crate) use codec::json_rest;
#[cfg(feature = "server")]
pub(crate) use continue_token::ContinueToken;
