//! [`Leases`]: the five Lease requests leader election and shard membership make, and their
//! implementation over `kube::Api<Lease>`.

use std::future::Future;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions};

/// Why a Lease request failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// 404: the Lease does not exist (an update or delete of a Lease someone deleted).
    #[error("lease {0} not found")]
    NotFound(String),
    /// 409: a create of a Lease that exists, or an update or delete from a resourceVersion
    /// that is no longer current (someone else wrote the Lease since it was read).
    #[error("lease {0}: conflict (someone else wrote it)")]
    Conflict(String),
    /// The request did not finish within the time left (the renew deadline).
    #[error("lease request timed out")]
    Timeout,
    /// Anything else (transport, authorization, validation), with the server's message.
    #[error("lease request failed: {0}")]
    Other(String),
}

/// Lease requests, in one namespace. Implemented for `kube::Api<Lease>`; tests use an
/// in-memory store with the same optimistic concurrency.
///
/// Every write sends the Lease as read (its `metadata.resourceVersion` set), so a writer that
/// raced with another gets [`LeaseError::Conflict`] instead of overwriting it.
pub trait Leases: Clone + Send + Sync + 'static {
    /// The Lease called `name`, or `None`.
    fn get(&self, name: &str) -> impl Future<Output = Result<Option<Lease>, LeaseError>> + Send;
    /// Creates `lease`; [`LeaseError::Conflict`] when it exists.
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<Lease, LeaseError>> + Send;
    /// Replaces `lease` (PUT) if its resourceVersion is still current.
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<Lease, LeaseError>> + Send;
    /// The Leases matching `label_selector`, read from the current state (not from a cache
    /// that may lag).
    fn list(
        &self,
        label_selector: &str,
    ) -> impl Future<Output = Result<Vec<Lease>, LeaseError>> + Send;
    /// Deletes the Lease called `name` if it is still at `resource_version`.
    fn delete(
        &self,
        name: &str,
        resource_version: &str,
    ) -> impl Future<Output = Result<(), LeaseError>> + Send;
}

fn classify(name: &str, e: kube::Error) -> LeaseError {
    match e {
        kube::Error::Api(s) if s.code == 404 => LeaseError::NotFound(name.to_owned()),
        kube::Error::Api(s) if s.code == 409 => LeaseError::Conflict(name.to_owned()),
        other => LeaseError::Other(other.to_string()),
    }
}

fn name_of(lease: &Lease) -> &str {
    lease.metadata.name.as_deref().unwrap_or("")
}

impl Leases for kube::Api<Lease> {
    async fn get(&self, name: &str) -> Result<Option<Lease>, LeaseError> {
        self.get_opt(name).await.map_err(|e| classify(name, e))
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        kube::Api::create(self, &PostParams::default(), lease)
            .await
            .map_err(|e| classify(name_of(lease), e))
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        let name = name_of(lease);
        kube::Api::replace(self, name, &PostParams::default(), lease)
            .await
            .map_err(|e| classify(name, e))
    }

    async fn list(&self, label_selector: &str) -> Result<Vec<Lease>, LeaseError> {
        // No resourceVersion: a consistent read of the current state.
        let lp = ListParams::default().labels(label_selector);
        kube::Api::list(self, &lp)
            .await
            .map(|l| l.items)
            .map_err(|e| classify("", e))
    }

    async fn delete(&self, name: &str, resource_version: &str) -> Result<(), LeaseError> {
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(resource_version.to_owned()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        kube::Api::delete(self, name, &dp)
            .await
            .map(|_| ())
            .map_err(|e| classify(name, e))
    }
}
