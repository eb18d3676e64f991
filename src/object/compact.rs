//! [`Compactor`]: turns objects into the compact form a compressed cache holds them in.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use zstd::zstd_safe::CCtx;

use super::body::Body;
use super::dictionary::Dictionary;
use super::text::Str;
use super::value::Object;
use super::{DecodeError, ObjectMeta, ObjectMetaFields, OwnerReference, StrMap};

/// Most distinct strings a [`Compactor`] shares across objects; later new ones are copied into
/// each object's own buffer instead (the set never shrinks while the compactor lives).
pub const INTERN_LIMIT: usize = 1 << 16;

/// Strings at most this long are shared when they repeat (label values, owner names,
/// annotation values); longer ones (e.g. `kubectl.kubernetes.io/last-applied-configuration`)
/// are rarely equal across objects and stay with their object.
const INTERN_MAX_LEN: usize = 96;

/// Makes the compact form of objects for a compressed cache: the body compressed with zstd and
/// one [`Dictionary`], and the metadata's strings moved out of the received buffer (which a
/// decoded object's strings slice, so the compact object keeps nothing of it alive). Strings
/// that repeat across objects (namespaces, label keys and values, annotation keys, owner
/// kinds and names, finalizers, `generateName`) are shared, one copy per distinct text, up to
/// [`INTERN_LIMIT`] of them; the rest of an object's strings and its managed-fields entries go
/// into one buffer of its own.
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
    shared: HashSet<Str, foldhash::fast::RandomState>,
    /// Scratch of one object's strings, in [`visit`] order.
    pieces: Vec<Piece>,
    own: Vec<u8>,
}

enum Piece {
    Shared(Str),
    Own(Range<usize>),
}

impl Compactor {
    /// A compactor compressing with `dict` at its level.
    pub fn new(dict: Arc<Dictionary>) -> Compactor {
        Compactor {
            dict,
            cctx: CCtx::create(),
            frame: Vec::new(),
            shared: HashSet::default(),
            pieces: Vec::new(),
            own: Vec::new(),
        }
    }

    /// The dictionary objects are compressed with.
    pub fn dictionary(&self) -> &Arc<Dictionary> {
        &self.dict
    }

    /// Distinct strings shared so far.
    pub fn shared_strings(&self) -> usize {
        self.shared.len()
    }

    /// The compact form of `obj`: equal to it (same metadata, same bytes through
    /// [`Object::raw`]), its body compressed, its strings in memory of its own. An object this
    /// compactor's dictionary already compressed is returned as it is (a clone).
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
        let body = obj.with_raw(|raw| Body::compress(raw, dict, cctx, frame))??;
        if self.frame.capacity() > 1 << 20 {
            self.frame = Vec::new();
        }
        let meta = self.own_meta(obj.meta());
        Ok(Object::from_body(
            obj.key(),
            obj.gvk_arc().clone(),
            meta,
            body,
            obj.encoding(),
        ))
    }

    fn own_meta(&mut self, meta: &ObjectMeta) -> ObjectMeta {
        self.pieces.clear();
        self.own.clear();
        let mut pieces = std::mem::take(&mut self.pieces);
        let mut own = std::mem::take(&mut self.own);
        visit(meta, |text, share| {
            let piece = if share && text.len() <= INTERN_MAX_LEN {
                self.share(text)
            } else {
                None
            };
            pieces.push(piece.map_or_else(
                || {
                    let start = own.len();
                    own.extend_from_slice(text);
                    Piece::Own(start..own.len())
                },
                Piece::Shared,
            ));
        });
        // One exact allocation for everything this object keeps of its own.
        let buf = Bytes::copy_from_slice(&own);
        let mut texts = pieces.drain(..).map(|p| match p {
            Piece::Shared(s) => PieceOut::Str(s),
            Piece::Own(r) => PieceOut::Bytes(buf.slice(r)),
        });
        let out = rebuild(meta, &mut texts);
        drop(texts);
        self.pieces = pieces;
        if own.capacity() <= 1 << 20 {
            self.own = own;
        }
        out
    }

    /// The shared copy of `text` (made now if new), or `None` once [`INTERN_LIMIT`] is reached.
    fn share(&mut self, text: &[u8]) -> Option<Str> {
        let text = std::str::from_utf8(text).ok()?;
        if let Some(s) = self.shared.get(text) {
            return Some(s.clone());
        }
        if self.shared.len() >= INTERN_LIMIT {
            return None;
        }
        let s = Str::from(text);
        self.shared.insert(s.clone());
        Some(s)
    }
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("dictionary", &self.dict)
            .field("shared_strings", &self.shared.len())
            .finish_non_exhaustive()
    }
}

enum PieceOut {
    Str(Str),
    Bytes(Bytes),
}

/// Every string and managed-fields entry of `meta`, in a fixed order, with whether it is worth
/// sharing across objects; [`rebuild`] consumes them in the same order.
fn visit(meta: &ObjectMeta, mut f: impl FnMut(&[u8], bool)) {
    f(meta.name().as_bytes(), false);
    f(meta.generate_name().as_bytes(), true);
    f(meta.namespace().as_bytes(), true);
    f(meta.uid().as_bytes(), false);
    f(meta.resource_version().as_bytes(), false);
    for (k, v) in meta.labels().iter() {
        f(k.as_bytes(), true);
        f(v.as_bytes(), true);
    }
    for (k, v) in meta.annotations().iter() {
        f(k.as_bytes(), true);
        f(v.as_bytes(), true);
    }
    for o in meta.owner_references() {
        f(o.api_version.as_bytes(), true);
        f(o.kind.as_bytes(), true);
        f(o.name.as_bytes(), true);
        f(o.uid.as_bytes(), true);
    }
    for s in meta.finalizers() {
        f(s.as_bytes(), true);
    }
    for m in meta.managed_fields() {
        f(m, false);
    }
}

fn rebuild(meta: &ObjectMeta, texts: &mut impl Iterator<Item = PieceOut>) -> ObjectMeta {
    // Every piece came from a `Str` (valid UTF-8), so the conversions cannot fail; an empty
    // string stands in should one ever do.
    let mut s = || match texts.next() {
        Some(PieceOut::Str(s)) => s,
        Some(PieceOut::Bytes(b)) => Str::try_from(b).unwrap_or_default(),
        None => Str::default(),
    };
    let name = s();
    let generate_name = s();
    let namespace = s();
    let uid = s();
    let resource_version = s();
    let labels: Vec<(Str, Str)> = meta.labels().iter().map(|_| (s(), s())).collect();
    let annotations: Vec<(Str, Str)> = meta.annotations().iter().map(|_| (s(), s())).collect();
    let owner_references = meta
        .owner_references()
        .map(|o| OwnerReference {
            api_version: s(),
            kind: s(),
            name: s(),
            uid: s(),
            controller: o.controller,
            block_owner_deletion: o.block_owner_deletion,
        })
        .collect();
    let finalizers = meta.finalizers().map(|_| s()).collect();
    let managed_fields = meta
        .managed_fields()
        .iter()
        .map(|_| match texts.next() {
            Some(PieceOut::Bytes(b)) => b,
            Some(PieceOut::Str(s)) => s.into_bytes(),
            None => Bytes::new(),
        })
        .collect();
    ObjectMetaFields {
        name,
        generate_name,
        namespace,
        uid,
        resource_version,
        generation: meta.generation(),
        creation_timestamp: meta.creation_timestamp(),
        deletion_timestamp: meta.deletion_timestamp(),
        deletion_grace_period_seconds: meta.deletion_grace_period_seconds(),
        labels: StrMap::from_unsorted(labels),
        annotations: StrMap::from_unsorted(annotations),
        owner_references,
        finalizers,
        managed_fields,
    }
    .into()
}
