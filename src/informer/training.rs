//! Training a compression dictionary: which samples, how many, and the thread that trains.

use crate::object::{DecodeError, Dictionary, Object};

use super::compression::ZstdOptions;

/// Bytes of samples per byte of dictionary trained (zstd's guidance is about 100).
const SAMPLE_BYTES_PER_DICT_BYTE: usize = 100;

/// Fewest objects a dictionary is trained from; zstd's trainer fails on fewer.
pub(super) const MIN_SAMPLES: usize = 16;

/// How many samples a training takes and how each is cut, from [`ZstdOptions`].
///
/// Whole objects (cut samples train worse), until `count` of them or `budget` bytes: zstd wants
/// about 100 bytes of samples per byte of dictionary; more costs training time and memory, not
/// ratio. Only an object over a sixteenth of the budget is cut to that.
#[derive(Clone, Copy, Debug)]
pub(super) struct SampleRules {
    /// Most samples.
    pub(super) count: usize,
    /// Bytes of samples that are enough.
    budget: usize,
    /// Longest sample, bytes.
    each: usize,
    dictionary_bytes: usize,
    level: i32,
}

impl SampleRules {
    pub(super) fn new(options: &ZstdOptions) -> SampleRules {
        let budget = options
            .dictionary_bytes
            .saturating_mul(SAMPLE_BYTES_PER_DICT_BYTE);
        SampleRules {
            count: options.train_samples.max(MIN_SAMPLES),
            budget,
            each: (budget / MIN_SAMPLES).max(1024),
            dictionary_bytes: options.dictionary_bytes,
            level: options.level,
        }
    }

    /// Whether `samples` are enough to train.
    pub(super) fn enough(&self, samples: &Samples) -> bool {
        samples.taken.len() >= self.count
            || (samples.bytes >= self.budget && samples.taken.len() >= MIN_SAMPLES)
    }

    /// Adds a sample of `obj` to `samples` unless they are enough already; returns whether it
    /// did. The sample is a copy (a slice would keep its whole list page alive until the
    /// training ends).
    pub(super) fn take(&self, samples: &mut Samples, obj: &Object) -> bool {
        if self.enough(samples) {
            return false;
        }
        let Ok(sample) = obj.with_raw(|raw| raw[..raw.len().min(self.each)].to_vec()) else {
            return false;
        };
        samples.bytes += sample.len();
        samples.taken.push(sample);
        true
    }

    /// Starts a thread training a dictionary from `samples` and hands its result to `done`
    /// (on that thread). `false` when no thread could start (`done` is then dropped uncalled).
    pub(super) fn spawn(
        &self,
        samples: Samples,
        done: impl FnOnce(Result<Dictionary, DecodeError>) + Send + 'static,
    ) -> bool {
        // zstd's trainer wants several times the dictionary's size in samples.
        let max = self.dictionary_bytes.min(samples.bytes / 8).max(256);
        let level = self.level;
        std::thread::Builder::new()
            .name("informer-dictionary".into())
            .spawn(move || done(Dictionary::train(&samples.taken, max, level)))
            .is_ok()
    }
}

/// Samples collected for a training, and their bytes.
#[derive(Default)]
pub(super) struct Samples {
    taken: Vec<Vec<u8>>,
    bytes: usize,
}

#[cfg(test)]
impl Samples {
    /// How many were taken.
    pub(super) fn len(&self) -> usize {
        self.taken.len()
    }
}
