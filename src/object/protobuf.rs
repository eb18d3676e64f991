//! The protobuf encoding: the `k8s\0` + `runtime.Unknown` envelope and the hand-written
//! metadata decoder (field 1 of every object message is `ObjectMeta`; everything else is skipped
//! by length). Upstream: `apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`,
//! `apimachinery/pkg/apis/meta/v1/generated.proto`.

use std::sync::Arc;

use bytes::Bytes;
use thin_vec::ThinVec;

use super::DecodeError;
use super::encoding::{Encoding, MAGIC};
use super::meta::{GroupVersionKind, ObjectMeta};
use super::meta_encode::encode_object_meta;
use super::meta_pack::{Counts, owner_flags};
use super::meta_scalars::MetaScalars;
use super::meta_view::{GENERATE_NAME, NAME, NAMESPACE, RESOURCE_VERSION, SINGLE_STRINGS, UID};
use super::protowire::{Field, Reader, WT_LEN, len_field_size, put_bytes, put_str, put_tag};
use super::time::Time;
use super::value::Object;
use super::varint;

/// The decoded `runtime.Unknown` envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Group/version/kind from `typeMeta` (empty strings when absent, as in watch events).
    pub gvk: GroupVersionKind,
    /// The object's own message bytes, a slice of the input.
    pub raw: Bytes,
    /// `contentEncoding` (empty on every known server).
    pub content_encoding: String,
    /// `contentType` (empty means protobuf).
    pub content_type: String,
}

/// Decodes `k8s\0` + `runtime.Unknown`. `raw` is returned as a slice of `input`.
///
/// # Errors
/// [`DecodeError::BadMagic`] / [`DecodeError::Truncated`] for a wrong or short prefix;
/// [`DecodeError::Missing`] when `raw` (field 2) is absent; any
/// protobuf error of the `Unknown` message, with offsets counted from the start of `input`.
pub fn decode_envelope(input: &Bytes) -> Result<Envelope, DecodeError> {
    let (parts, content_encoding, content_type) = envelope_fields(input)?;
    Ok(Envelope {
        gvk: GroupVersionKind::from_api_version(parts.api_version, parts.kind),
        raw: parts.raw,
        content_encoding: content_encoding.to_owned(),
        content_type: content_type.to_owned(),
    })
}

/// The envelope's `typeMeta` strings (borrowed from the input) and `raw`, for decoders that
/// look the group/version/kind up instead of allocating it for every object.
#[derive(Debug)]
pub(crate) struct EnvelopeParts<'a> {
    /// `typeMeta.apiVersion` (`v1`, `apps/v1`; empty when absent).
    pub(crate) api_version: &'a str,
    /// `typeMeta.kind` (empty when absent).
    pub(crate) kind: &'a str,
    /// The object's own message bytes, a slice of the input.
    pub(crate) raw: Bytes,
}

/// [`decode_envelope`] without allocating: same checks and errors.
pub(crate) fn decode_envelope_parts(input: &Bytes) -> Result<EnvelopeParts<'_>, DecodeError> {
    envelope_fields(input).map(|(parts, _, _)| parts)
}

/// Reads the envelope: its parts plus `contentEncoding` and `contentType`.
fn envelope_fields(input: &Bytes) -> Result<(EnvelopeParts<'_>, &str, &str), DecodeError> {
    if input.len() < MAGIC.len() {
        if MAGIC.starts_with(input) {
            return Err(DecodeError::Truncated {
                offset: input.len() as u64,
                context: "magic",
            });
        }
        return Err(DecodeError::BadMagic {
            found: input.to_vec(),
        });
    }
    if input[..4] != MAGIC {
        return Err(DecodeError::BadMagic {
            found: input[..4].to_vec(),
        });
    }
    let mut r = Reader::new(input, 4, input.len(), "runtime.Unknown");
    let mut parts = EnvelopeParts {
        api_version: "",
        kind: "",
        raw: Bytes::new(),
    };
    let (mut content_encoding, mut content_type) = ("", "");
    let mut has_raw = false;
    while let Some(f) = r.next_field()? {
        match f.number {
            1 => read_type_meta(
                r.message(&f, "runtime.TypeMeta")?,
                &mut parts.api_version,
                &mut parts.kind,
            )?,
            2 => {
                parts.raw = r.bytes(&f)?;
                has_raw = true;
            }
            3 => content_encoding = r.str(&f)?,
            4 => content_type = r.str(&f)?,
            _ => r.skip(&f)?,
        }
    }
    if !has_raw {
        return Err(DecodeError::Missing {
            what: "runtime.Unknown raw (field 2)",
            offset: 4,
        });
    }
    Ok((parts, content_encoding, content_type))
}

/// Reads a `runtime.TypeMeta` message: its `apiVersion` and `kind`, each overwriting what
/// `api_version` and `kind` held when present.
pub(crate) fn read_type_meta<'a>(
    mut tm: Reader<'a>,
    api_version: &mut &'a str,
    kind: &mut &'a str,
) -> Result<(), DecodeError> {
    while let Some(g) = tm.next_field()? {
        match g.number {
            1 => *api_version = tm.str(&g)?,
            2 => *kind = tm.str(&g)?,
            _ => tm.skip(&g)?,
        }
    }
    Ok(())
}

/// Encodes `k8s\0` + `runtime.Unknown{typeMeta, raw}` (contentEncoding and contentType written
/// empty, as the API server does).
pub fn encode_envelope(gvk: &GroupVersionKind, raw: &[u8]) -> Bytes {
    let api_version = gvk.api_version();
    let mut out = Vec::with_capacity(envelope_size(&api_version, &gvk.kind, raw.len()));
    encode_envelope_into(&api_version, &gvk.kind, raw, &mut out);
    Bytes::from(out)
}

/// Size of the envelope [`encode_envelope_into`] writes.
pub(crate) fn envelope_size(api_version: &str, kind: &str, raw_len: usize) -> usize {
    let tm = len_field_size(api_version.len()) + len_field_size(kind.len());
    MAGIC.len() + len_field_size(tm) + len_field_size(raw_len) + 4
}

/// Appends the envelope to `out`, copying `raw` once.
pub(crate) fn encode_envelope_into(api_version: &str, kind: &str, raw: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC);
    put_tag(out, 1, WT_LEN);
    varint::put(
        out,
        (len_field_size(api_version.len()) + len_field_size(kind.len())) as u64,
    );
    put_str(out, 1, api_version);
    put_str(out, 2, kind);
    put_bytes(out, 2, raw);
    put_str(out, 3, "");
    put_str(out, 4, "");
}

/// Decodes a protobuf object in its envelope.
pub(crate) fn decode_object(input: &Bytes) -> Result<Object, DecodeError> {
    let env = decode_envelope(input)?;
    let base = (env.raw.as_ptr() as usize).wrapping_sub(input.as_ptr() as usize) as u64;
    decode_bare(Arc::new(env.gvk), env.raw).map_err(|e| e.shifted(base))
}

/// Decodes a bare object message (no envelope): metadata from field 1, every other field skipped.
pub(crate) fn decode_bare(gvk: Arc<GroupVersionKind>, raw: Bytes) -> Result<Object, DecodeError> {
    let meta = decode_object_meta(&raw)?;
    Ok(Object::from_parts(gvk, meta, raw, Encoding::Protobuf))
}

/// Reads `ObjectMeta` out of a bare object message: every occurrence of field 1 is merged, as
/// protobuf requires; all other top-level fields are skipped by length. The strings are copied
/// into the metadata's own buffer; managed-fields entries are slices of `raw`.
pub(crate) fn decode_object_meta(raw: &Bytes) -> Result<ObjectMeta, DecodeError> {
    // Where each string lies is gathered in this thread's reused buffers, then the strings are
    // copied into the metadata's one text buffer in `Counts` order. A nested call (none
    // today) gets buffers of its own.
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let meta = decode_object_meta_into(raw, &mut scratch);
            scratch.reset();
            meta
        }
        Err(_) => decode_object_meta_into(raw, &mut Scan::default()),
    })
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scan> = std::cell::RefCell::default();
}

/// Where a string field's bytes lie in the object message, with the field it came from (for
/// the error should it not be UTF-8).
#[derive(Clone, Copy, Default)]
struct Span {
    start: usize,
    end: usize,
    message: &'static str,
    field: u32,
}

/// What [`decode_object_meta`] has read of an `ObjectMeta` so far: the spans of its strings
/// (a repeated single field keeps its last occurrence, as protobuf merges), its scalars and
/// its managed-fields entries; then the packed text being assembled.
#[derive(Default)]
struct Scan {
    single: [Span; SINGLE_STRINGS],
    labels: Vec<[Span; 2]>,
    annotations: Vec<[Span; 2]>,
    owners: Vec<([Span; 4], u32)>,
    finalizers: Vec<Span>,
    managed: Vec<(usize, usize)>,
    scalars: MetaScalars,
    text: Vec<u8>,
    ends: Vec<u32>,
}

/// Entries (and text bytes, / 64) a reused buffer keeps room for between decodes: one object
/// with thousands of annotations must not leave megabytes reserved on every thread that
/// decoded it.
const KEEP_ENTRIES: usize = 256;

impl Scan {
    fn reset(&mut self) {
        fn reset<T>(v: &mut Vec<T>, keep: usize) {
            v.clear();
            v.shrink_to(keep);
        }
        self.single = Default::default();
        self.scalars = MetaScalars::default();
        reset(&mut self.labels, KEEP_ENTRIES);
        reset(&mut self.annotations, KEEP_ENTRIES);
        reset(&mut self.owners, KEEP_ENTRIES);
        reset(&mut self.finalizers, KEEP_ENTRIES);
        reset(&mut self.managed, KEEP_ENTRIES);
        reset(&mut self.text, 64 * KEEP_ENTRIES);
        reset(&mut self.ends, 4 * KEEP_ENTRIES);
    }
}

/// Records `new` in `slot`. The string it replaces (a field repeated: the last one wins) is
/// checked first: only the strings kept are checked in one pass at the end, and invalid UTF-8
/// must be an error wherever it appears (as prost has it).
fn replace(raw: &[u8], slot: &mut Span, new: Span) -> Result<(), DecodeError> {
    check(raw, slot)?;
    *slot = new;
    Ok(())
}

/// `InvalidUtf8` naming `s`'s field when its bytes are not UTF-8.
fn check(raw: &[u8], s: &Span) -> Result<(), DecodeError> {
    match std::str::from_utf8(&raw[s.start..s.end]) {
        Ok(_) => Ok(()),
        Err(_) => Err(DecodeError::InvalidUtf8 {
            message: s.message,
            field: s.field,
            offset: s.start as u64,
        }),
    }
}

fn span(r: &mut Reader<'_>, f: &Field, message: &'static str) -> Result<Span, DecodeError> {
    let (start, end) = r.len_delimited(f)?;
    Ok(Span {
        start,
        end,
        message,
        field: f.number,
    })
}

fn decode_object_meta_into(raw: &Bytes, scan: &mut Scan) -> Result<ObjectMeta, DecodeError> {
    // Empty already unless an earlier decode on this thread unwound part-way (a panic caught
    // by the runtime).
    scan.reset();
    // The string ends are `u32`s: metadata over 4 GiB (far beyond any frame limit) is refused.
    if u32::try_from(raw.len()).is_err() {
        return Err(DecodeError::FrameTooLarge {
            offset: 0,
            len: raw.len() as u64,
            limit: u32::MAX as usize,
        });
    }
    let mut r = Reader::new(raw, 0, raw.len(), "object");
    while let Some(f) = r.next_field()? {
        if f.number == 1 {
            let m = r.message(&f, "ObjectMeta")?;
            merge_object_meta(m, raw, scan)?;
        } else {
            r.skip(&f)?;
        }
    }
    sort_map(raw, &mut scan.labels)?;
    sort_map(raw, &mut scan.annotations)?;
    let Scan {
        single,
        labels,
        annotations,
        owners,
        finalizers,
        managed,
        scalars,
        text,
        ends,
    } = scan;
    // Every string is copied in `Counts` order, then the whole text is checked once: it is
    // UTF-8 and each string ends on a char boundary exactly when every string is UTF-8.
    for (i, s) in single.iter().enumerate() {
        text.extend_from_slice(&raw[s.start..s.end]);
        ends.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
        // The key's `/` after a non-empty namespace (see `SINGLE_STRINGS`).
        if i == NAMESPACE && s.end > s.start {
            text.push(b'/');
        }
    }
    let mut push = |s: &Span| {
        text.extend_from_slice(&raw[s.start..s.end]);
        ends.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
    };
    labels
        .iter()
        .chain(annotations.iter())
        .flatten()
        .for_each(&mut push);
    owners.iter().flat_map(|(o, _)| o).for_each(&mut push);
    finalizers.iter().for_each(&mut push);
    let valid = std::str::from_utf8(text)
        .ok()
        .filter(|t| ends.iter().all(|&e| t.is_char_boundary(e as usize)));
    let Some(valid) = valid else {
        // Name the first string that is not UTF-8.
        let first_bad = single
            .iter()
            .chain(labels.iter().chain(annotations.iter()).flatten())
            .chain(owners.iter().flat_map(|(o, _)| o))
            .chain(finalizers.iter())
            .find_map(|s| check(raw, s).err());
        return Err(first_bad.unwrap_or(DecodeError::InvalidUtf8 {
            message: "ObjectMeta",
            field: 0,
            offset: 0,
        }));
    };
    ends.extend(owners.iter().map(|(_, flags)| *flags));
    let counts = Counts::new(
        labels.len(),
        annotations.len(),
        owners.len(),
        finalizers.len(),
    );
    let managed: ThinVec<Bytes> = managed.iter().map(|&(s, e)| raw.slice(s..e)).collect();
    Ok(ObjectMeta::from_packed(
        valid,
        ends,
        counts,
        // The scan is reset before its next use: its boxed deletion fields can move out.
        std::mem::take(scalars),
        managed,
    ))
}

/// Sorts map entries by key and keeps the last value of a repeated key (protobuf and Go map
/// semantics; the entries dropped are checked for UTF-8 first, as [`replace`] does); entries
/// that arrive sorted and unique (servers sort map keys) cost one pass.
fn sort_map(raw: &[u8], entries: &mut Vec<[Span; 2]>) -> Result<(), DecodeError> {
    let key = |e: &[Span; 2]| &raw[e[0].start..e[0].end];
    if entries.windows(2).all(|w| key(&w[0]) < key(&w[1])) {
        return Ok(());
    }
    entries.sort_by(|a, b| key(a).cmp(key(b)));
    // Stable sort: of equal keys the last one read is the last in the run.
    let mut out: Vec<[Span; 2]> = Vec::with_capacity(entries.len());
    for e in entries.drain(..) {
        match out.last_mut() {
            Some(last) if key(last) == key(&e) => {
                check(raw, &last[0])?;
                check(raw, &last[1])?;
                *last = e;
            }
            _ => out.push(e),
        }
    }
    *entries = out;
    Ok(())
}

/// Merges one `ObjectMeta` message into `scan`; its repeated fields are appended in wire order
/// (label and annotation entries are sorted by [`sort_map`] after).
fn merge_object_meta(mut r: Reader<'_>, raw: &[u8], scan: &mut Scan) -> Result<(), DecodeError> {
    while let Some(f) = r.next_field()? {
        let single = match f.number {
            1 => Some(NAME),
            2 => Some(GENERATE_NAME),
            3 => Some(NAMESPACE),
            5 => Some(UID),
            6 => Some(RESOURCE_VERSION),
            _ => None,
        };
        if let Some(i) = single {
            let s = span(&mut r, &f, "ObjectMeta")?;
            replace(raw, &mut scan.single[i], s)?;
            continue;
        }
        match f.number {
            7 => scan.scalars.set_generation(Some(r.int64(&f)?)),
            8 => scan
                .scalars
                .set_creation_timestamp(time(r.message(&f, "Time")?)?),
            9 => scan
                .scalars
                .set_deletion_timestamp(time(r.message(&f, "Time")?)?),
            10 => scan
                .scalars
                .set_deletion_grace_period_seconds(Some(r.int64(&f)?)),
            11 | 12 => {
                let entry = map_entry(r.message(&f, "ObjectMeta map entry")?, raw)?;
                if f.number == 11 {
                    scan.labels.push(entry);
                } else {
                    scan.annotations.push(entry);
                }
            }
            13 => scan
                .owners
                .push(owner_reference(r.message(&f, "OwnerReference")?, raw)?),
            14 => scan.finalizers.push(span(&mut r, &f, "ObjectMeta")?),
            17 => scan.managed.push(r.len_delimited(&f)?),
            // 4 selfLink (deprecated), 15 clusterName and 16 initializers (retired), unknown.
            _ => r.skip(&f)?,
        }
    }
    Ok(())
}

/// An empty `Time` message is Go's zero time, which upstream treats as unset (JSON `null`).
fn time(mut r: Reader<'_>) -> Result<Option<Time>, DecodeError> {
    if r.is_done() {
        return Ok(None);
    }
    let mut t = Time::default();
    while let Some(f) = r.next_field()? {
        match f.number {
            1 => t.seconds = r.int64(&f)?,
            2 => t.nanos = r.int32(&f)?,
            _ => r.skip(&f)?,
        }
    }
    Ok(Some(t))
}

/// A map entry's key and value spans (an absent one is empty).
fn map_entry(mut r: Reader<'_>, raw: &[u8]) -> Result<[Span; 2], DecodeError> {
    let mut kv = [Span::default(); 2];
    while let Some(f) = r.next_field()? {
        match f.number {
            1 | 2 => {
                let s = span(&mut r, &f, "ObjectMeta map entry")?;
                replace(raw, &mut kv[f.number as usize - 1], s)?;
            }
            _ => r.skip(&f)?,
        }
    }
    Ok(kv)
}

/// An owner reference's spans (apiVersion, kind, name, uid) and flags word.
fn owner_reference(mut r: Reader<'_>, raw: &[u8]) -> Result<([Span; 4], u32), DecodeError> {
    let mut s = [Span::default(); 4];
    let (mut controller, mut blocks) = (None, None);
    while let Some(f) = r.next_field()? {
        let slot = match f.number {
            5 => Some(0),
            1 => Some(1),
            3 => Some(2),
            4 => Some(3),
            _ => None,
        };
        if let Some(i) = slot {
            let new = span(&mut r, &f, "OwnerReference")?;
            replace(raw, &mut s[i], new)?;
            continue;
        }
        match f.number {
            6 => controller = Some(r.bool(&f)?),
            7 => blocks = Some(r.bool(&f)?),
            _ => r.skip(&f)?,
        }
    }
    Ok((s, owner_flags(controller, blocks)))
}

/// Re-encodes a bare object message with new metadata: field 1 is written from `meta`, every
/// other top-level field is copied byte for byte in its original order.
pub(crate) fn replace_meta(raw: &Bytes, meta: &ObjectMeta) -> Result<Bytes, DecodeError> {
    let mut out = Vec::with_capacity(raw.len() + 64);
    let mut meta_buf = Vec::with_capacity(256);
    encode_object_meta(meta, &mut meta_buf);
    put_tag(&mut out, 1, WT_LEN);
    varint::put(&mut out, meta_buf.len() as u64);
    out.extend_from_slice(&meta_buf);
    let mut r = Reader::new(raw, 0, raw.len(), "object");
    while let Some(f) = r.next_field()? {
        let start = f.tag_offset;
        r.skip(&f)?;
        if f.number != 1 {
            out.extend_from_slice(&raw[start..r.pos()]);
        }
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectMetaFields;
    use crate::object::protowire::put_message;

    /// A bare object message whose metadata has `labels` (and one finalizer per label).
    fn object(name: &str, labels: &[(&str, &str)]) -> Vec<u8> {
        let mut meta = ObjectMetaFields {
            name: name.into(),
            ..Default::default()
        };
        for (k, v) in labels {
            meta.labels.insert((*k).into(), (*v).into());
            meta.finalizers.push((*k).into());
        }
        let mut out = Vec::new();
        put_message(&mut out, 1, |m| {
            encode_object_meta(&ObjectMeta::from(meta.clone()), m)
        });
        out
    }

    #[test]
    fn a_rejected_object_leaves_nothing_in_the_next_ones_metadata() {
        let first = object("a", &[("x", "1"), ("y", "2")]);
        let meta = decode_object_meta(&Bytes::from(first.clone())).unwrap();
        assert_eq!(meta.labels().len(), 2);
        assert_eq!(meta.labels().get("y"), Some("2"));
        // The same metadata followed by a second `ObjectMeta` occurrence whose tag is a
        // truncated varint: an error after the first occurrence's entries were gathered.
        let mut bad = first.clone();
        bad.extend_from_slice(&[0x0a, 0x02, 0xff, 0xff]);
        assert!(matches!(
            decode_object_meta(&Bytes::from(bad)),
            Err(DecodeError::Truncated { .. })
        ));
        let meta = decode_object_meta(&Bytes::from(object("b", &[("z", "3")]))).unwrap();
        assert_eq!(meta.name(), "b");
        assert_eq!(meta.labels().keys().collect::<Vec<_>>(), ["z"]);
        assert!(meta.finalizers().eq(["z"]));
        assert_eq!(meta.labels().len(), 1);
    }

    #[test]
    fn reused_buffers_keep_little_room_after_a_huge_object() {
        let many: Vec<(String, String)> = (0..5_000)
            .map(|i| (format!("k{i:05}"), String::new()))
            .collect();
        let labels: Vec<(&str, &str)> = many.iter().map(|(k, v)| (&**k, &**v)).collect();
        let meta = decode_object_meta(&Bytes::from(object("big", &labels))).unwrap();
        assert_eq!(meta.labels().len(), 5_000);
        assert_eq!(meta.labels().get("k04999"), Some(""));
        SCRATCH.with_borrow(|s| {
            assert!(s.labels.is_empty() && s.finalizers.is_empty());
            assert!(
                s.labels.capacity() <= KEEP_ENTRIES,
                "{}",
                s.labels.capacity()
            );
            assert!(s.finalizers.capacity() <= KEEP_ENTRIES);
        });
    }
}
