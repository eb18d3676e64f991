//! Object metadata: the decoded `meta.v1.ObjectMeta` subset, keys and group/version/kind.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use thin_vec::ThinVec;

use super::key::ObjectKey;
use super::meta_fields::ObjectMetaFields;
use super::meta_pack::{COUNT_WORDS, Counts, Packer, owner_flags};
use super::meta_scalars::MetaScalars;
use super::meta_view::{
    Finalizers, GENERATE_NAME, NAME, NAMESPACE, OwnerRef, OwnerRefs, Pieces, RESOURCE_VERSION,
    SINGLE_STRINGS, StrMapRef, UID,
};
use super::tails::{MetaTails, SharedText};
use super::text::Str;
use super::time::Time;

/// The decoded `meta.v1.ObjectMeta` fields an informer needs (field numbers in
/// `../shared/fixtures/README.md`, upstream `apimachinery/pkg/apis/meta/v1/types.go`), read
/// through accessors: strings as `&str`, labels and annotations as a [`StrMapRef`], owner
/// references as [`OwnerRef`](super::OwnerRef)s.
///
/// Absent strings read as empty strings, as in Go. `managedFields` is kept undecoded, one
/// protobuf message per entry (JSON input keeps the JSON array text as one entry), as slices
/// of the received bytes.
///
/// Build one from [`ObjectMetaFields`] (`fields.into()`); copy one out, to edit it, with
/// [`ObjectMeta::to_fields`]. Cloning is two reference-count increments (three for a compact
/// object's, whose tail is shared), a copy of the managed-fields slice handles if any, and a
/// copy of the boxed deletion fields of an object being deleted.
///
/// # Examples
/// ```
/// use informer::object::{ObjectMeta, ObjectMetaFields};
/// let meta = ObjectMeta::from(ObjectMetaFields {
///     name: "web-0".into(),
///     namespace: "shop".into(),
///     resource_version: "42".into(),
///     labels: [("app", "web")].into_iter().collect(),
///     ..Default::default()
/// });
/// assert_eq!(meta.name(), "web-0");
/// assert_eq!(meta.resource_version_u64(), Some(42));
/// assert_eq!(meta.labels().get("app"), Some("web"));
/// ```
// Packed: every string of the metadata lies in one shared `text`, one after another, and
// `single` and `ends` hold where each ends (see `Counts`), so a decoded object holds two
// allocations for its metadata however many strings it has (one more for its managed fields,
// one more while it is being deleted), and dropping it frees them. The first layout (one
// reference-counted slice of the received frame per string, a vector per repeated field) made
// 8 allocations and about 17 reference counts per etcd Pod, a third of the reflector's CPU in
// the allocator and half the handler thread's in drops (`perf record`, e2e-inproc); it also
// kept the received frame alive in a compressed cache.
#[derive(Clone)]
pub struct ObjectMeta {
    text: Arc<str>,
    /// Where the five single strings end in `text`: kept inline, so that reading a name or a
    /// resourceVersion touches `text` alone (with the ends in their own block, a handler's read
    /// of the resourceVersion was two dependent cache misses, 2.8 % of its thread's samples).
    single: [u32; SINGLE_STRINGS],
    /// The [`Counts`] ([`COUNT_WORDS`] words), then where each further string ends, in
    /// `Counts` order, then one flags word per owner reference (`OWNER_CONTROLLER` and
    /// friends). The counts are here, not inline, because a compact object's `ends` is
    /// shared ([`MetaTails`]): 16 bytes less in every object, which with `managed_fields`'s
    /// thin pointer and the boxed deletion fields ([`MetaScalars`]) puts `Object` in a
    /// 192-byte block instead of 224.
    ends: Arc<[u32]>,
    /// Where the strings after the single ones lie, when not in `text`: a compact object's
    /// labels, annotations, owner references and finalizers, shared with other objects
    /// ([`MetaTails`]); `ends` then counts from its start. A thin pointer (the text one hop
    /// further): 8 bytes of the struct, where an `Arc<str>` takes 16.
    tail: Option<SharedText>,
    scalars: MetaScalars,
    /// One pointer, not a slice's two words (and no allocation when empty).
    managed_fields: ThinVec<Bytes>,
}

/// Most bytes of metadata text after the key that a key may keep alive by sharing the text
/// ([`ObjectMeta::key`]): a compact object's generateName, uid and resourceVersion, a received
/// small object's labels and owners; a key outlives its object in work queues and tombstones.
const KEY_SHARE_SLACK: usize = 256;

impl Packer {
    /// The metadata of what was pushed.
    pub(crate) fn finish(
        &self,
        counts: Counts,
        scalars: MetaScalars,
        managed_fields: ThinVec<Bytes>,
    ) -> ObjectMeta {
        let (text, ends) = self.parts();
        ObjectMeta::from_packed(text, ends, counts, scalars, managed_fields)
    }
}

impl Default for ObjectMeta {
    fn default() -> Self {
        ObjectMeta::from_packed(
            "",
            &[0; SINGLE_STRINGS],
            Counts::default(),
            MetaScalars::default(),
            ThinVec::new(),
        )
    }
}

impl From<ObjectMetaFields> for ObjectMeta {
    fn from(f: ObjectMetaFields) -> Self {
        ObjectMeta::from(&f)
    }
}

impl From<&ObjectMetaFields> for ObjectMeta {
    /// Packs the fields (every string copied). Strings past 4 GiB of metadata in all, which no
    /// API server sends, read as empty.
    fn from(f: &ObjectMetaFields) -> Self {
        let counts = Counts::new(
            f.labels.len(),
            f.annotations.len(),
            f.owner_references.len(),
            f.finalizers.len(),
        );
        let mut p = Packer::with_capacity(0, counts.words());
        p.singles(
            &f.namespace,
            &f.name,
            &f.generate_name,
            &f.uid,
            &f.resource_version,
        );
        for (k, v) in f.labels.iter().chain(f.annotations.iter()) {
            p.push(k);
            p.push(v);
        }
        for o in &f.owner_references {
            for s in [&o.api_version, &o.kind, &o.name, &o.uid] {
                p.push(s);
            }
        }
        for s in &f.finalizers {
            p.push(s);
        }
        for o in &f.owner_references {
            p.word(owner_flags(o.controller, o.block_owner_deletion));
        }
        p.finish(
            counts,
            MetaScalars::new(
                f.generation,
                f.creation_timestamp,
                f.deletion_timestamp,
                f.deletion_grace_period_seconds,
            ),
            f.managed_fields.iter().cloned().collect(),
        )
    }
}

impl PartialEq for ObjectMeta {
    fn eq(&self, other: &Self) -> bool {
        // The layout is canonical (map keys sorted and unique), so equal metadata is equal
        // strings, ends and counts, the tail's ends counted from its start.
        fn singles(m: &ObjectMeta) -> &str {
            let end = m.single[SINGLE_STRINGS - 1] as usize;
            m.text.get(..end).unwrap_or("")
        }
        let ((a, a_ends, a_words), (b, b_ends, b_words)) = (self.tail_parts(), other.tail_parts());
        self.counts() == other.counts()
            && self.scalars == other.scalars
            && self.single == other.single
            && singles(self) == singles(other)
            && a == b
            && a_words == b_words
            && a_ends.eq(b_ends)
            && self.managed_fields == other.managed_fields
    }
}

impl Eq for ObjectMeta {}

impl PartialEq<ObjectMetaFields> for ObjectMeta {
    fn eq(&self, o: &ObjectMetaFields) -> bool {
        self.name() == &*o.name
            && self.generate_name() == &*o.generate_name
            && self.namespace() == &*o.namespace
            && self.uid() == &*o.uid
            && self.resource_version() == &*o.resource_version
            && self.generation() == o.generation
            && self.creation_timestamp() == o.creation_timestamp
            && self.deletion_timestamp() == o.deletion_timestamp
            && self.deletion_grace_period_seconds() == o.deletion_grace_period_seconds
            && self.labels() == o.labels
            && self.annotations() == o.annotations
            && self
                .owner_references()
                .eq(o.owner_references.iter().map(OwnerRef::from))
            && self.finalizers().eq(o.finalizers.iter().map(|f| &**f))
            && self.managed_fields() == &*o.managed_fields
    }
}

impl fmt::Debug for ObjectMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectMeta")
            .field("name", &self.name())
            .field("generate_name", &self.generate_name())
            .field("namespace", &self.namespace())
            .field("uid", &self.uid())
            .field("resource_version", &self.resource_version())
            .field("generation", &self.scalars.generation())
            .field("creation_timestamp", &self.scalars.creation_timestamp())
            .field("deletion_timestamp", &self.scalars.deletion_timestamp())
            .field(
                "deletion_grace_period_seconds",
                &self.scalars.deletion_grace_period_seconds(),
            )
            .field("labels", &self.labels())
            .field("annotations", &self.annotations())
            .field("owner_references", &self.owner_references())
            .field("finalizers", &self.finalizers())
            .field("managed_fields", &self.managed_fields.len())
            .finish()
    }
}

impl ObjectMeta {
    /// Metadata from its packed parts: `ends` (of length `counts.words()`) in `Counts`
    /// order, each string ending on a char boundary of `text`. Strings outside `text` (which
    /// the decoders never make) read as empty.
    pub(crate) fn from_packed(
        text: &str,
        ends: &[u32],
        counts: Counts,
        scalars: MetaScalars,
        managed_fields: ThinVec<Bytes>,
    ) -> Self {
        debug_assert_eq!(ends.len(), counts.words());
        let mut single = [0; SINGLE_STRINGS];
        let n = ends.len().min(SINGLE_STRINGS);
        single[..n].copy_from_slice(&ends[..n]);
        let rest = ends.get(SINGLE_STRINGS..).unwrap_or_default();
        ObjectMeta {
            text: Arc::from(text),
            single,
            ends: counts
                .to_words()
                .into_iter()
                .chain(rest.iter().copied())
                .collect(),
            tail: None,
            scalars,
            managed_fields,
        }
    }

    fn counts(&self) -> Counts {
        Counts::from_words(&self.ends)
    }

    /// `ends` after the counts: the words from the first string after the single ones on.
    fn end_words(&self) -> &[u32] {
        self.ends.get(COUNT_WORDS..).unwrap_or_default()
    }

    fn pieces(&self) -> Pieces<'_> {
        let (tail, start) = self.tail_text();
        Pieces::new(&self.text, &self.single, tail, start, self.end_words())
    }

    /// The text the strings after the single ones lie in, and where the first starts.
    fn tail_text(&self) -> (&str, u32) {
        match &self.tail {
            Some(t) => (t.as_ref(), 0),
            None => (&self.text, self.single[SINGLE_STRINGS - 1]),
        }
    }

    /// The tail's strings as one string, the ends of each counted from its start, and the
    /// words after them (owner flags); the same whether the tail is shared or not.
    fn tail_parts(&self) -> (&str, impl Iterator<Item = u32> + '_, &[u32]) {
        let (text, start) = self.tail_text();
        let strings = self.counts().flags_at() - SINGLE_STRINGS;
        let all = self.end_words();
        let (ends, words) = all.split_at(strings.min(all.len()));
        let end = ends.last().copied().unwrap_or(start);
        let joined = text.get(start as usize..end as usize).unwrap_or("");
        (
            joined,
            ends.iter().map(move |e| e.wrapping_sub(start)),
            words,
        )
    }

    /// The same metadata with its labels, annotations, owner references and finalizers in
    /// `tails`' shared copy (made now if new); as it is when already shared, when `tails` is
    /// full, or when there is nothing after the single strings.
    pub(crate) fn sharing_tail(&self, tails: &MetaTails) -> ObjectMeta {
        let counts = self.counts();
        if self.tail.is_some() || counts.flags_at() == SINGLE_STRINGS {
            return self.clone();
        }
        let (joined, ends, words) = self.tail_parts();
        let rebased: Vec<u32> = (counts.to_words().into_iter())
            .chain(ends)
            .chain(words.iter().copied())
            .collect();
        let Some((tail, ends)) = tails.share(joined, &rebased) else {
            return self.clone();
        };
        let singles = self.single[SINGLE_STRINGS - 1] as usize;
        ObjectMeta {
            text: Arc::from(self.text.get(..singles).unwrap_or("")),
            ends,
            tail: Some(tail),
            ..self.clone()
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.pieces().get(NAME)
    }

    /// `metadata.generateName`.
    pub fn generate_name(&self) -> &str {
        self.pieces().get(GENERATE_NAME)
    }

    /// `metadata.namespace`; empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        self.pieces().get(NAMESPACE)
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.pieces().get(UID)
    }

    /// `metadata.resourceVersion`: opaque to clients; an etcd revision on real servers.
    pub fn resource_version(&self) -> &str {
        self.pieces().get(RESOURCE_VERSION)
    }

    /// `metadata.generation`, `None` when absent.
    pub fn generation(&self) -> Option<i64> {
        self.scalars.generation()
    }

    /// `metadata.creationTimestamp`, `None` when absent.
    pub fn creation_timestamp(&self) -> Option<Time> {
        self.scalars.creation_timestamp()
    }

    /// `metadata.deletionTimestamp`: set once deletion has been requested.
    pub fn deletion_timestamp(&self) -> Option<Time> {
        self.scalars.deletion_timestamp()
    }

    /// `metadata.deletionGracePeriodSeconds`.
    pub fn deletion_grace_period_seconds(&self) -> Option<i64> {
        self.scalars.deletion_grace_period_seconds()
    }

    /// `metadata.labels`, in key order.
    pub fn labels(&self) -> StrMapRef<'_> {
        let c = self.counts();
        StrMapRef::packed(self.pieces(), c.labels_at(), c.labels as usize)
    }

    /// `metadata.annotations`, in key order.
    pub fn annotations(&self) -> StrMapRef<'_> {
        let c = self.counts();
        StrMapRef::packed(self.pieces(), c.annotations_at(), c.annotations as usize)
    }

    /// `metadata.ownerReferences`, in wire order.
    pub fn owner_references(&self) -> OwnerRefs<'_> {
        let c = self.counts();
        OwnerRefs::new(
            self.pieces(),
            c.owners_at(),
            c.flags_at(),
            c.owners as usize,
        )
    }

    /// `metadata.finalizers`, in wire order.
    pub fn finalizers(&self) -> Finalizers<'_> {
        let c = self.counts();
        Finalizers::new(self.pieces(), c.finalizers_at(), c.finalizers as usize)
    }

    /// `metadata.managedFields`, undecoded: one protobuf `ManagedFieldsEntry` per entry, or,
    /// from JSON, the whole JSON array as one entry.
    pub fn managed_fields(&self) -> &[Bytes] {
        &self.managed_fields
    }

    /// An editable copy of the fields (every string copied).
    pub fn to_fields(&self) -> ObjectMetaFields {
        ObjectMetaFields {
            name: self.name().into(),
            generate_name: self.generate_name().into(),
            namespace: self.namespace().into(),
            uid: self.uid().into(),
            resource_version: self.resource_version().into(),
            generation: self.scalars.generation(),
            creation_timestamp: self.scalars.creation_timestamp(),
            deletion_timestamp: self.scalars.deletion_timestamp(),
            deletion_grace_period_seconds: self.scalars.deletion_grace_period_seconds(),
            labels: self.labels().to_map(),
            annotations: self.annotations().to_map(),
            owner_references: self
                .owner_references()
                .map(|o| o.to_owner_reference())
                .collect(),
            finalizers: self.finalizers().map(Str::from).collect(),
            managed_fields: self.managed_fields().to_vec(),
        }
    }

    /// The object's cache key: `namespace/name`, or `name` when the namespace is empty
    /// (client-go `MetaNamespaceKeyFunc`, `tools/cache/store.go`).
    pub fn key(&self) -> ObjectKey {
        // The text starts with the key: shared, unless that would keep much more text alive
        // with the key (labels and annotations of a received object) than the key itself.
        let end = self.single[NAME] as usize;
        if self.text.len() - end.min(self.text.len()) <= KEY_SHARE_SLACK {
            ObjectKey::prefix_of(&self.text, end)
        } else {
            ObjectKey::from_raw(self.text.get(..end).unwrap_or_default())
        }
    }

    /// `resourceVersion` parsed as the unsigned integer real servers use (etcd revision).
    /// `None` when empty or not a decimal number.
    pub fn resource_version_u64(&self) -> Option<u64> {
        parse_resource_version(self.resource_version())
    }

    /// What the metadata holds in memory of its own beyond its struct, bytes: the strings,
    /// their ends, the managed-fields handles (not the buffer those slice) and the deletion
    /// fields of an object being deleted. A shared tail
    /// ([`tail_is_shared`](Self::tail_is_shared)) and its ends belong to the
    /// [`MetaTails`] table, once for all the objects that share them, and are not counted.
    pub fn heap_len(&self) -> usize {
        let ends = if self.tail.is_some() {
            0
        } else {
            4 * self.ends.len()
        };
        // A thin vector's block also holds its length and capacity.
        let managed = match self.managed_fields.len() {
            0 => 0,
            n => 16 + n * size_of::<Bytes>(),
        };
        self.text.len() + ends + managed + self.scalars.heap_len()
    }

    /// Whether the labels, annotations, owner references and finalizers lie in a tail shared
    /// through [`MetaTails`] (a compact object's), rather than in the metadata's own text.
    pub fn tail_is_shared(&self) -> bool {
        self.tail.is_some()
    }

    /// The same metadata with its managed-fields entries copied into memory of their own, so
    /// that it no longer keeps the buffer it was decoded from alive (its strings never do).
    pub fn detached(&self) -> ObjectMeta {
        // One buffer for all the entries, each a slice of it.
        let entries = &self.managed_fields;
        if entries.is_empty() {
            return self.clone();
        }
        let mut all = Vec::with_capacity(entries.iter().map(|b| b.len()).sum());
        for b in entries.iter() {
            all.extend_from_slice(b);
        }
        let all = Bytes::from(all);
        let mut at = 0;
        let copies: ThinVec<Bytes> = entries
            .iter()
            .map(|b| {
                at += b.len();
                all.slice(at - b.len()..at)
            })
            .collect();
        ObjectMeta {
            managed_fields: copies,
            ..self.clone()
        }
    }
}

/// Parses a resourceVersion as a decimal `u64` (etcd revision). `None` when it is empty or not a
/// plain decimal number; Kubernetes only promises that resourceVersions are opaque strings, so
/// callers must treat `None` as "cannot be ordered".
pub fn parse_resource_version(rv: &str) -> Option<u64> {
    if rv.is_empty() {
        return None;
    }
    // One pass with checked arithmetic (a check for digits then `str::parse` read it twice;
    // the store's writer and many handlers parse one per event).
    rv.bytes().try_fold(0u64, |n, b| {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// Group, version and kind of an object (`schema.GroupVersionKind`). The core group is `""`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionKind {
    /// API group, `""` for the core group (`v1`).
    pub group: String,
    /// API version within the group, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
}

impl GroupVersionKind {
    /// Builds a GVK from its three parts.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        GroupVersionKind {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// Splits an `apiVersion` (`v1`, `apps/v1`) and pairs it with `kind`.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        GroupVersionKind::new(group, version, kind)
    }

    /// The `apiVersion` string: `version` for the core group, else `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether this is the GVK [`GroupVersionKind::from_api_version`] would build from
    /// `api_version` and `kind`, compared without allocating.
    pub fn matches_api_version(&self, api_version: &str, kind: &str) -> bool {
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        self.kind == kind && self.version == version && self.group == group
    }

    /// The item kind of a list kind: `PodList` → `Pod`; other kinds unchanged.
    pub fn item_of_list(&self) -> Self {
        let kind = self.kind.strip_suffix("List").unwrap_or(&self.kind);
        GroupVersionKind::new(&self.group, &self.version, kind)
    }
}

impl fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}.{}", self.version, self.kind)
        } else {
            write!(f, "{}.{}.{}", self.group, self.version, self.kind)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_resource_version;

    #[test]
    fn resource_versions_parse_as_plain_decimal_u64_only() {
        assert_eq!(parse_resource_version("0"), Some(0));
        assert_eq!(parse_resource_version("007"), Some(7));
        assert_eq!(parse_resource_version("123456"), Some(123_456));
        assert_eq!(
            parse_resource_version("18446744073709551615"),
            Some(u64::MAX)
        );
        for bad in [
            "",
            "18446744073709551616",
            "+1",
            "-1",
            "12a",
            " 1",
            "1.5",
            "١",
        ] {
            assert_eq!(parse_resource_version(bad), None, "{bad:?}");
        }
    }
}
