//! An in-memory Lease store with the API server's optimistic concurrency, for unit tests on
//! paused time: each handle can be cut off (its requests fail) to play a partitioned replica,
//! or answered late to play a stalled one.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;

use super::leases::{LeaseError, Leases};

#[derive(Debug, Default)]
struct State {
    leases: BTreeMap<String, Lease>,
    rv: u64,
}

/// One client of a shared in-memory Lease store.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryLeases {
    state: Arc<Mutex<State>>,
    down: Arc<AtomicBool>,
    slow: Arc<Mutex<VecDeque<Duration>>>,
}

impl MemoryLeases {
    /// Another client of the same store, with its own connection state.
    pub(crate) fn client(&self) -> MemoryLeases {
        MemoryLeases {
            state: self.state.clone(),
            down: Arc::default(),
            slow: Arc::default(),
        }
    }

    /// Cuts this client off (every request fails) or reconnects it.
    pub(crate) fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// The answers to this client's next requests come late, one delay per request in order
    /// (on tokio time): each request takes effect at once, and its caller hears of it only
    /// after the delay, as with a stalled process or a slow connection.
    pub(crate) fn slow_answers(&self, delays: &[Duration]) {
        self.slow.lock().unwrap().extend(delays);
    }

    async fn slow_answer(&self) {
        let delay = self.slow.lock().unwrap().pop_front();
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
    }

    /// Deletes `name`, whatever its version, at once, as a user with kubectl would.
    ///
    /// # Panics
    /// When there is no such Lease.
    pub(crate) fn remove(&self, name: &str) {
        let rv = self.peek(name).and_then(|l| l.metadata.resource_version);
        self.delete_now(name, &rv.expect("a Lease to delete"))
            .unwrap();
    }

    /// The stored Lease called `name`.
    pub(crate) fn peek(&self, name: &str) -> Option<Lease> {
        self.state.lock().unwrap().leases.get(name).cloned()
    }

    fn check(&self) -> Result<std::sync::MutexGuard<'_, State>, LeaseError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(LeaseError::Other("connection refused".into()));
        }
        Ok(self.state.lock().unwrap())
    }
}

fn name(l: &Lease) -> String {
    l.metadata.name.clone().unwrap_or_default()
}

fn matches(l: &Lease, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let (k, v) = term.split_once('=').unwrap_or((term, ""));
        l.metadata
            .labels
            .as_ref()
            .and_then(|m| m.get(k))
            .is_some_and(|x| x == v)
    })
}

impl State {
    /// Keeps `lease` under `name` with the next resourceVersion; returns what was kept.
    fn store(&mut self, name: String, lease: &Lease) -> Lease {
        self.rv += 1;
        let mut l = lease.clone();
        l.metadata.resource_version = Some(self.rv.to_string());
        self.leases.insert(name, l.clone());
        l
    }
}

/// The requests, answered at once.
impl MemoryLeases {
    fn get_now(&self, name: &str) -> Result<Option<Lease>, LeaseError> {
        Ok(self.check()?.leases.get(name).cloned())
    }

    fn create_now(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        let mut s = self.check()?;
        let n = name(lease);
        if s.leases.contains_key(&n) {
            return Err(LeaseError::Conflict(n));
        }
        Ok(s.store(n, lease))
    }

    fn replace_now(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        let mut s = self.check()?;
        let n = name(lease);
        let Some(current) = s.leases.get(&n) else {
            return Err(LeaseError::NotFound(n));
        };
        if current.metadata.resource_version != lease.metadata.resource_version {
            return Err(LeaseError::Conflict(n));
        }
        Ok(s.store(n, lease))
    }

    fn list_now(&self, label_selector: &str) -> Result<Vec<Lease>, LeaseError> {
        let s = self.check()?;
        Ok(s.leases
            .values()
            .filter(|l| matches(l, label_selector))
            .cloned()
            .collect())
    }

    fn delete_now(&self, name: &str, resource_version: &str) -> Result<(), LeaseError> {
        let mut s = self.check()?;
        let Some(current) = s.leases.get(name) else {
            return Err(LeaseError::NotFound(name.to_owned()));
        };
        if current.metadata.resource_version.as_deref() != Some(resource_version) {
            return Err(LeaseError::Conflict(name.to_owned()));
        }
        s.leases.remove(name);
        Ok(())
    }
}

impl Leases for MemoryLeases {
    async fn get(&self, name: &str) -> Result<Option<Lease>, LeaseError> {
        let r = self.get_now(name);
        self.slow_answer().await;
        r
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        let r = self.create_now(lease);
        self.slow_answer().await;
        r
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        let r = self.replace_now(lease);
        self.slow_answer().await;
        r
    }

    async fn list(&self, label_selector: &str) -> Result<Vec<Lease>, LeaseError> {
        let r = self.list_now(label_selector);
        self.slow_answer().await;
        r
    }

    async fn delete(&self, name: &str, resource_version: &str) -> Result<(), LeaseError> {
        let r = self.delete_now(name, resource_version);
        self.slow_answer().await;
        r
    }
}
