//! Training a compression dictionary: which samples, how many, and the thread that trains.

use crate::object::{DecodeError, Dictionary};

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

    /// Whether `samples` samples of `bytes` bytes in all are enough to train.
    pub(super) fn enough(&self, samples: usize, bytes: usize) -> bool {
        samples >= self.count || (bytes >= self.budget && samples >= MIN_SAMPLES)
    }

    /// The sample taken from an object's bytes (a copy: a slice would keep its whole list page
    /// alive until the training ends).
    pub(super) fn sample(&self, raw: &[u8]) -> Vec<u8> {
        raw[..raw.len().min(self.each)].to_vec()
    }

    /// Starts a thread training a dictionary from `samples` and hands its result to `done`
    /// (on that thread). `false` when no thread could start (`done` is then dropped uncalled).
    pub(super) fn spawn(
        &self,
        samples: Vec<Vec<u8>>,
        done: impl FnOnce(Result<Dictionary, DecodeError>) + Send + 'static,
    ) -> bool {
        let total: usize = samples.iter().map(Vec::len).sum();
        // zstd's trainer wants several times the dictionary's size in samples.
        let max = self.dictionary_bytes.min(total / 8).max(256);
        let level = self.level;
        std::thread::Builder::new()
            .name("informer-dictionary".into())
            .spawn(move || done(Dictionary::train(&samples, max, level)))
            .is_ok()
    }
}
