//! Arguments `informer elect` and `informer shard` share: the cluster, the Leases' namespace,
//! the identity and the Lease timing; and their JSON-lines output.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use informer::client::ClientOptions;
use informer::election::ElectionTiming;
use tokio::time::Instant;

/// The cluster, the identity and the timing of a Lease holder.
#[derive(Debug, clap::Args)]
pub(crate) struct LeaseArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long)]
    pub(crate) kubeconfig: Option<std::path::PathBuf>,
    /// Kubeconfig context (default: the current one).
    #[arg(long)]
    pub(crate) context: Option<String>,
    /// API server URL (with a kubeconfig: replaces its server; alone: no credentials).
    #[arg(long)]
    pub(crate) server: Option<String>,
    /// Namespace of the Leases.
    #[arg(long, default_value = "default")]
    pub(crate) lease_namespace: String,
    /// This process's identity (default: hostname and pid).
    #[arg(long)]
    pub(crate) identity: Option<String>,
    /// Seconds others wait, from the last change they saw, before taking a Lease over.
    #[arg(long, default_value_t = 15.0, value_parser = super::duration::seconds)]
    pub(crate) lease_duration: f64,
    /// Seconds the holder keeps acting without a successful renewal.
    #[arg(long, default_value_t = 10.0, value_parser = super::duration::seconds)]
    pub(crate) renew_deadline: f64,
    /// Seconds between renewals (and between a candidate's tries).
    #[arg(long, default_value_t = 2.0, value_parser = super::duration::seconds)]
    pub(crate) retry_period: f64,
    /// Stop after this many seconds (default: run until Ctrl-C), releasing what it holds.
    #[arg(long, value_parser = super::duration::seconds)]
    pub(crate) duration: Option<f64>,
}

impl LeaseArgs {
    pub(crate) fn timing(&self) -> ElectionTiming {
        ElectionTiming {
            lease_duration: Duration::from_secs_f64(self.lease_duration),
            renew_deadline: Duration::from_secs_f64(self.renew_deadline),
            retry_period: Duration::from_secs_f64(self.retry_period),
        }
    }

    pub(crate) fn identity(&self) -> String {
        self.identity
            .clone()
            .unwrap_or_else(|| informer::election::default_identity("informer"))
    }

    pub(crate) async fn client(&self) -> Result<kube::Client, String> {
        ClientOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            server: self.server.clone(),
        }
        .client()
        .await
        .map_err(|e| e.to_string())
    }
}

/// Wall-clock nanoseconds since the Unix epoch (for timelines compared across processes on one
/// machine).
pub(crate) fn wall_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// `instant` (monotonic) as wall-clock nanoseconds.
pub(crate) fn instant_ns(instant: Instant) -> u128 {
    let now = Instant::now();
    let wall = wall_ns();
    if instant >= now {
        wall + (instant - now).as_nanos()
    } else {
        wall.saturating_sub((now - instant).as_nanos())
    }
}

/// Prints one JSON line on stdout and flushes it (a reader of the pipe sees it at once).
pub(crate) fn emit(v: serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}
