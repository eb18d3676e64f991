//! [`Dictionary`]: a zstd dictionary prepared for compressing and decompressing cached objects'
//! bodies.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

use zstd::zstd_safe::{CDict, DDict};

use super::DecodeError;

/// A zstd dictionary, prepared once for both directions (zstd `ZSTD_CDict` + `ZSTD_DDict`), and
/// the level objects are compressed with. Shared as `Arc<Dictionary>` by every object compressed
/// with it, so each object decompresses with exactly the dictionary it was made with.
///
/// Train one from objects of one resource with [`Dictionary::train`] (the informer does, from
/// its first list, when [`Compression::Zstd`](crate::informer::Compression) asks it to), or load
/// one saved earlier with [`Dictionary::from_bytes`].
///
/// # Examples
/// ```
/// use informer::object::Dictionary;
/// let pods: Vec<Vec<u8>> = (0..200)
///     .map(|i| format!(r#"{{"metadata":{{"name":"pod-{i}","namespace":"default"}},"spec":{{"nodeName":"node-{}"}}}}"#, i % 7).into_bytes())
///     .collect();
/// let dict = Dictionary::train(&pods, 4096, 3).unwrap();
/// assert!(dict.len() <= 4096);
/// ```
pub struct Dictionary {
    /// This process's number for it (never 0), also written into every frame it makes.
    id: u32,
    level: i32,
    len: usize,
    /// The content, with this process's id in its header.
    bytes: Box<[u8]>,
    cdict: CDict<'static>,
    ddict: DDict<'static>,
}

/// Numbers the dictionaries made by this process: a frame's dictionary id names the one it needs.
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

impl Dictionary {
    /// Trains a dictionary of at most `max_bytes` from `samples` (whole objects' bytes, as
    /// cached) with zstd's trainer, for compression at `level` (1–22; 3 is zstd's default).
    ///
    /// # Errors
    /// [`DecodeError::Compression`] when zstd cannot train one (too few or too small samples:
    /// it wants about a hundred times `max_bytes` of input to do well, and fails on tiny sets).
    pub fn train(
        samples: &[impl AsRef<[u8]>],
        max_bytes: usize,
        level: i32,
    ) -> Result<Dictionary, DecodeError> {
        let trained =
            zstd::dict::from_samples(samples, max_bytes).map_err(|e| DecodeError::Compression {
                dictionary: 0,
                reason: format!("training a dictionary from {} samples: {e}", samples.len()),
            })?;
        Dictionary::from_bytes(&trained, level)
    }

    /// Prepares a dictionary from its bytes (one [`Dictionary::train`] made, or zstd's
    /// `--train` writes). Its zstd header's id is replaced by a number of this process's.
    ///
    /// # Errors
    /// [`DecodeError::Compression`] when zstd rejects the bytes (a corrupt dictionary header).
    pub fn from_bytes(bytes: &[u8], level: i32) -> Result<Dictionary, DecodeError> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed).max(1);
        let bad = |what: &str| DecodeError::Compression {
            dictionary: id,
            reason: format!("zstd rejected the {}-byte dictionary ({what})", bytes.len()),
        };
        // A trained dictionary starts with zstd's magic, then its 4-byte id: ours goes there,
        // so a frame names the exact dictionary object it was made with. Raw-content
        // dictionaries (no magic) carry no id; frames made with them record none.
        let mut own = bytes.to_vec();
        if own.len() >= 8 && own[..4] == 0xEC30_A437u32.to_le_bytes() {
            own[4..8].copy_from_slice(&id.to_le_bytes());
        }
        let cdict = CDict::try_create(&own, level).ok_or_else(|| bad("compression"))?;
        let ddict = DDict::try_create(&own).ok_or_else(|| bad("decompression"))?;
        Ok(Dictionary {
            id,
            level,
            len: bytes.len(),
            bytes: own.into_boxed_slice(),
            cdict,
            ddict,
        })
    }

    /// This process's number for the dictionary (never 0).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The dictionary's content in zstd's format: save it and load it in a later run with
    /// [`Dictionary::from_bytes`] (which gives it a new id).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The zstd level objects are compressed at.
    pub fn level(&self) -> i32 {
        self.level
    }

    /// Size of the dictionary's content, bytes (zstd's prepared forms take a few times that).
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` for an empty dictionary (zstd then compresses without one).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn cdict(&self) -> &CDict<'static> {
        &self.cdict
    }

    pub(super) fn ddict(&self) -> &DDict<'static> {
        &self.ddict
    }
}

impl fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dictionary")
            .field("id", &self.id)
            .field("level", &self.level)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}
