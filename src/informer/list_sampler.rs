//! [`ListSampler`]: the first dictionary, trained from the first objects of the first list, so
//! that the rest of that list is compacted as it arrives.

use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;

use crate::object::{Dictionary, KeySet, Object};

use super::compression::ZstdOptions;
use super::training::{SampleRules, Samples};

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
/// Only the first list is sampled, each object once (a retried list or a streaming list's
/// repeated key adds no second sample): the sampler closes when that list ends
/// ([`ListSampler::close`]). A list too short to fill the samples leaves the training to the
/// processing thread, which trains from the store once the informer has synced, as it does
/// when this training fails.
pub(super) struct ListSampler {
    rules: SampleRules,
    state: Mutex<Sampling>,
    /// The informer's dictionary slot: the trained one goes there (unless one is already).
    dictionary: Arc<ArcSwapOption<Dictionary>>,
    /// Wakes the processing thread, to start compacting.
    wake: Arc<tokio::sync::Notify>,
}

enum Sampling {
    /// Copies of the objects listed so far, and their keys.
    Collecting { samples: Samples, keys: KeySet },
    /// A thread trains from them.
    Training,
    /// Trained, failed, closed with too few samples, or handed over to the processing thread.
    Over,
}

/// Ends a training thread's run whatever happens to it (a panic in zstd's trainer included):
/// the sampler is over and the processing thread wakes, to adopt the dictionary or train one.
struct Finish(Arc<ListSampler>);

impl Drop for Finish {
    fn drop(&mut self) {
        *self.0.state() = Sampling::Over;
        self.0.wake.notify_one();
    }
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
                samples: Samples::default(),
                keys: KeySet::default(),
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
        let Sampling::Collecting { samples, keys } = &mut *state else {
            return;
        };
        for o in items {
            if self.rules.enough(samples) {
                break;
            }
            if !keys.contains(o.key_ref()) && self.rules.take(samples, o) {
                keys.insert(o.key());
            }
        }
        if !self.rules.enough(samples) {
            return;
        }
        let samples = std::mem::take(samples);
        *state = Sampling::Training;
        drop(state);
        // Also when no thread starts: the closure, and `finish` with it, is dropped unrun.
        let finish = Finish(self.clone());
        self.rules.spawn(samples, move |trained| {
            match trained {
                Ok(dict) => {
                    let dict = Some(Arc::new(dict));
                    finish
                        .0
                        .dictionary
                        .rcu(|now| now.clone().or_else(|| dict.clone()));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "training a dictionary from the first list failed")
                }
            }
            drop(finish);
        });
    }

    /// The first list ended: stops collecting (and frees the samples) unless a training runs.
    pub(super) fn close(&self) {
        let mut state = self.state();
        if matches!(*state, Sampling::Collecting { .. }) {
            *state = Sampling::Over;
        }
    }

    /// Whether the processing thread may train from the store (the list was too short to fill
    /// the samples, or this training failed): `false` while this sampler's training runs.
    /// Closes the sampler.
    pub(super) fn hand_over(&self) -> bool {
        let mut state = self.state();
        if matches!(*state, Sampling::Training) {
            return false;
        }
        *state = Sampling::Over;
        true
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::object::{Encoding, GroupVersionKind, ObjectMeta, ObjectMetaFields};

    fn obj(name: &str) -> Arc<Object> {
        let meta = ObjectMeta::from(ObjectMetaFields {
            name: name.to_owned().into(),
            namespace: "ns".to_owned().into(),
            ..Default::default()
        });
        let raw = format!(r#"{{"metadata":{{"name":"{name}","namespace":"ns"}}}}"#);
        Arc::new(Object::from_parts(
            Arc::new(GroupVersionKind::new("", "v1", "Pod")),
            meta,
            Bytes::from(raw),
            Encoding::Json,
        ))
    }

    fn sampler() -> Arc<ListSampler> {
        let options = ZstdOptions {
            train_samples: 100,
            ..Default::default()
        };
        Arc::new(ListSampler::new(
            &options,
            Arc::default(),
            Arc::new(tokio::sync::Notify::new()),
        ))
    }

    /// Samples collected so far; `None` once the sampler no longer collects.
    fn collected(s: &ListSampler) -> Option<usize> {
        match &*s.state() {
            Sampling::Collecting { samples, .. } => Some(samples.len()),
            _ => None,
        }
    }

    #[test]
    fn an_object_listed_again_is_not_sampled_twice() {
        let s = sampler();
        let page: Vec<_> = (0..10).map(|i| obj(&format!("pod-{i}"))).collect();
        s.offer(&page);
        // A retried list, or a streaming list's second event for the same keys.
        s.offer(&page);
        assert_eq!(collected(&s), Some(10));
    }

    #[test]
    fn the_end_of_the_first_list_frees_the_samples_and_ends_sampling() {
        let s = sampler();
        s.offer(&[obj("a"), obj("b")]);
        s.close();
        assert_eq!(collected(&s), None);
        // A relist offers nothing more.
        s.offer(
            &(0..200)
                .map(|i| obj(&format!("pod-{i}")))
                .collect::<Vec<_>>(),
        );
        assert_eq!(collected(&s), None);
        assert!(s.dictionary.load().is_none());
        assert!(s.hand_over());
    }

    #[test]
    fn a_training_thread_that_panics_still_ends_the_training() {
        let s = sampler();
        *s.state() = Sampling::Training;
        assert!(
            !s.hand_over(),
            "the processing thread waits while it trains"
        );
        let finish = Finish(s.clone());
        let died = std::thread::spawn(move || {
            let _finish = finish;
            panic!("zstd's trainer failed");
        })
        .join();
        assert!(died.is_err());
        assert!(s.hand_over(), "after it, the processing thread may train");
    }
}
