//! [`Compactor`]: turns objects into the compact form a compressed cache holds them in.

use std::sync::Arc;

use zstd::zstd_safe::CCtx;

use super::DecodeError;
use super::body::Body;
use super::dictionary::Dictionary;
use super::encoding::Encoding;
use super::tails::MetaTails;
use super::value::Object;

/// Makes the compact form of objects for a compressed cache: the body compressed with zstd and
/// one [`Dictionary`], the metadata's managed-fields entries copied out of the received buffer
/// (which they slice; the metadata's strings are in memory of their own already), so the
/// compact object keeps nothing of that buffer alive, and the metadata's labels, annotations,
/// owner references and finalizers shared with the objects that have the same ones
/// ([`MetaTails`]).
///
/// Not `Sync`: one compactor per thread (it holds a zstd compression context).
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use informer::object::{Compactor, Dictionary, decode};
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/k8s-testdata/HEAD/core.v1.Pod.json");
/// let pod = decode(std::fs::read(path).unwrap().into()).unwrap();
/// let dict = Arc::new(Dictionary::from_bytes(&pod.raw().unwrap(), 3).unwrap());
/// let mut compactor = Compactor::new(dict);
/// let small = compactor.compact(&pod).unwrap();
/// assert!(small.cached_len() < pod.cached_len() / 10);
/// assert_eq!(small.raw().unwrap(), pod.raw().unwrap());
/// assert_eq!(small.meta(), pod.meta());
/// ```
pub struct Compactor {
    dict: Arc<Dictionary>,
    cctx: CCtx<'static>,
    frame: Vec<u8>,
    tails: MetaTails,
}

impl Compactor {
    /// A compactor compressing with `dict` at its level, with a table of shared metadata tails
    /// of its own.
    pub fn new(dict: Arc<Dictionary>) -> Compactor {
        Compactor::with_tails(dict, MetaTails::new())
    }

    /// A compactor compressing with `dict` whose objects share metadata tails through `tails`
    /// (with every other compactor given it: an informer's).
    pub fn with_tails(dict: Arc<Dictionary>, tails: MetaTails) -> Compactor {
        Compactor {
            dict,
            cctx: CCtx::create(),
            frame: Vec::new(),
            tails,
        }
    }

    /// The table of shared metadata tails.
    pub fn tails(&self) -> &MetaTails {
        &self.tails
    }

    /// The dictionary objects are compressed with.
    pub fn dictionary(&self) -> &Arc<Dictionary> {
        &self.dict
    }

    /// The compact form of `obj`: equal to it (same metadata, same bytes through
    /// [`Object::raw`]), its body compressed, nothing of the received buffer kept. An object
    /// this compactor's dictionary already compressed is returned as it is (a clone).
    ///
    /// # Errors
    /// [`DecodeError::Compression`] when zstd fails, or when `obj` is compressed with another
    /// dictionary that cannot decompress it.
    pub fn compact(&mut self, obj: &Object) -> Result<Object, DecodeError> {
        if obj
            .compressed_with()
            .is_some_and(|d| Arc::ptr_eq(d, &self.dict))
        {
            return Ok(obj.clone());
        }
        let (dict, cctx, frame) = (&self.dict, &mut self.cctx, &mut self.frame);
        // Protobuf metadata the API server wrote re-encodes exactly: the frame leaves it out.
        let meta = (obj.encoding() == Encoding::Protobuf).then(|| obj.meta());
        let body = obj.with_raw(|raw| Body::compress(raw, meta, dict, cctx, frame))??;
        if self.frame.capacity() > 1 << 20 {
            self.frame = Vec::new();
        }
        // The key from the new metadata: it shares that text, not the received one.
        let meta = obj.meta().detached().sharing_tail(&self.tails);
        Ok(Object::from_body(
            meta.key(),
            obj.gvk_arc().clone(),
            meta,
            body,
            obj.encoding(),
        ))
    }
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("dictionary", &self.dict)
            .field("tails", &self.tails)
            .finish_non_exhaustive()
    }
}
