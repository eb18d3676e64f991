//! [`ListSampler`]: the first dictionary, trained from the first objects of the first list, so
//! that the rest of that list is compacted as it arrives.

use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;

use crate::object::{Dictionary, Object};

use super::compression::ZstdOptions;
use super::training::SampleRules;

/// Copies the first listed objects (up to [`ZstdOptions::train_samples`] or the sample budget)
/// and trains the informer's first dictionary from them on a thread of its own, while the list
/// goes on. Once the dictionary is in place, [`ListCompactor`](super::list_compactor) compacts
/// every later page as it arrives, and the processing thread compacts the objects listed
/// before.
///
/// Without it a list is held whole, uncompressed, until the store has synced and a dictionary
/// is trained from it. `informer watch --compression zstd` of 100 000 varied Pods
/// (`informer serve --vary`) peaked at 1 441 MB of RSS for HEAD Pods (126 MB steady) and 315 MB
/// for etcd Pods (101 MB steady); with it, at 223 MB and 149 MB. The price is samples from the
/// start of the list (its first namespaces, in key order) instead of spread over it: frames 5 %
/// larger on that corpus (HEAD Pods 242 → 253 bytes, etcd Pods 185 → 193). The ratio watch
/// retrains when later objects compress much worse.
///
/// A list too short to fill the samples leaves the training to the processing thread, which
/// takes over ([`ListSampler::hand_over`]) once the informer has synced.
pub(super) struct ListSampler {
    rules: SampleRules,
    state: Mutex<Sampling>,
    /// The informer's dictionary slot: the trained one goes there (unless one is already).
    dictionary: Arc<ArcSwapOption<Dictionary>>,
    /// Wakes the processing thread, to start compacting.
    wake: Arc<tokio::sync::Notify>,
}

enum Sampling {
    /// Copies of the objects listed so far, and their bytes.
    Collecting { samples: Vec<Vec<u8>>, bytes: usize },
    /// A thread trains from them.
    Training,
    /// Trained, failed, or handed over to the processing thread.
    Over,
}

impl ListSampler {
    pub(super) fn new(
        options: &ZstdOptions,
        dictionary: Arc<ArcSwapOption<Dictionary>>,
        wake: Arc<tokio::sync::Notify>,
    ) -> ListSampler {
        ListSampler {
            rules: SampleRules::new(options),
            state: Mutex::new(Sampling::Collecting {
                samples: Vec::new(),
                bytes: 0,
            }),
            dictionary,
            wake,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Sampling> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes samples from listed `items` (in list order) while it still collects, and starts
    /// the training once it has enough.
    pub(super) fn offer(self: &Arc<Self>, items: &[Arc<Object>]) {
        let mut state = self.state();
        let Sampling::Collecting { samples, bytes } = &mut *state else {
            return;
        };
        for o in items {
            if self.rules.enough(samples.len(), *bytes) {
                break;
            }
            if let Ok(sample) = o.with_raw(|raw| self.rules.sample(raw)) {
                *bytes += sample.len();
                samples.push(sample);
            }
        }
        if !self.rules.enough(samples.len(), *bytes) {
            return;
        }
        let samples = std::mem::take(samples);
        *state = Sampling::Training;
        drop(state);
        let me = self.clone();
        let started = self.rules.spawn(samples, move |trained| {
            match trained {
                Ok(dict) => {
                    let dict = Some(Arc::new(dict));
                    me.dictionary
                        .rcu(|now| now.clone().or_else(|| dict.clone()));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "training a dictionary from the first list failed")
                }
            }
            *me.state() = Sampling::Over;
            me.wake.notify_one();
        });
        if !started {
            *self.state() = Sampling::Over;
        }
    }

    /// The processing thread trains from the store instead (the list was too short to fill the
    /// samples, or the training failed): frees what was collected and returns `true`, or
    /// `false` while a training of this sampler's is still running.
    pub(super) fn hand_over(&self) -> bool {
        let mut state = self.state();
        if matches!(*state, Sampling::Training) {
            return false;
        }
        *state = Sampling::Over;
        true
    }
}
