//! [`Str`]: the string type of [`super::ObjectMeta`].

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use bytes::Bytes;
use bytestring::ByteString;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smol_str::SmolStr;

/// An immutable UTF-8 string: the string type of every [`super::ObjectMeta`] field.
///
/// Text of up to 23 bytes is held inline (no allocation, no reference count); longer text is a
/// slice of a shared [`bytes::Bytes`] buffer. A decoded object's long strings are slices of the
/// buffer it was decoded from (cloning one bumps that buffer's reference count; nothing is
/// copied), its short ones (namespaces, resourceVersions, most label keys and values) are copied
/// into the value itself, so that cloning and dropping them touch no shared counter. The
/// representation is invisible: ordering, equality and hashing are those of the text
/// (`Borrow<str>`), and a `Str` compares equal to `&str` and `String`.
///
/// Build one with `"name".into()` or `String::into()` (which copy, resp. take over, the text) or
/// `Str::try_from(bytes)` (fails on invalid UTF-8); read it as a `&str` through `Deref`. 32 bytes.
///
/// ```
/// use informer::object::Str;
/// let ns: Str = "kube-system".into();
/// assert_eq!(ns, "kube-system");
/// assert_eq!(ns.len(), 11);
/// let uid = Str::try_from(bytes::Bytes::from_static(b"3f1c2b9e-6d2a-4c8e-9b51-0f4e7a1d2c3b")).unwrap();
/// assert!(uid.starts_with("3f1c"));
/// assert!(Str::try_from(bytes::Bytes::from_static(b"\xff")).is_err());
/// ```
#[derive(Clone)]
pub struct Str(Repr);

// Measured on the in-process etcd Pod stream (benches/e2e.rs): with every string a `Bytes`
// slice, the handler threads spent about half their time in `Bytes` reference-count drops of
// replaced objects; most metadata strings fit the 23 inline bytes.
#[derive(Clone)]
enum Repr {
    Inline(SmolStr),
    Shared(ByteString),
}

/// The longest text held inline.
const INLINE: usize = SmolStr::INLINE_CAP;

impl Str {
    /// The empty string (no allocation).
    pub const fn new() -> Str {
        Str(Repr::Inline(SmolStr::new_inline("")))
    }

    /// The text as a `&str` (also what `Deref` gives).
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline(s) => s.as_str(),
            Repr::Shared(s) => s,
        }
    }

    /// A `Str` of static text (no copy, no allocation).
    pub fn from_static(s: &'static str) -> Str {
        if s.len() <= INLINE {
            Str(Repr::Inline(SmolStr::new(s)))
        } else {
            Str(Repr::Shared(ByteString::from_static(s)))
        }
    }

    /// The text's bytes as a [`Bytes`]: the shared buffer's slice (no copy) when the text is
    /// shared, a copy when it is held inline.
    pub fn into_bytes(self) -> Bytes {
        match self.0 {
            Repr::Inline(s) => Bytes::copy_from_slice(s.as_bytes()),
            Repr::Shared(s) => s.into_bytes(),
        }
    }

    /// Whether the text shares a buffer with other values (a slice of a decoded frame, or long
    /// text built from a `String`), rather than being held inline.
    pub fn is_shared(&self) -> bool {
        matches!(self.0, Repr::Shared(_))
    }

    /// `buf[range]` as a `Str`, UTF-8 checked: copied inline when short (without touching
    /// `buf`'s reference count), else a slice of `buf` (no copy).
    ///
    /// # Panics
    /// When `range` is out of `buf`'s bounds.
    #[inline]
    pub(crate) fn from_utf8_in(
        buf: &Bytes,
        range: std::ops::Range<usize>,
    ) -> Result<Str, std::str::Utf8Error> {
        let b = &buf[range.clone()];
        if b.len() <= INLINE {
            Ok(Str(Repr::Inline(SmolStr::new(std::str::from_utf8(b)?))))
        } else {
            Ok(Str(Repr::Shared(ByteString::try_from(buf.slice(range))?)))
        }
    }

    /// `sub`, a part of `buf`'s text, as a `Str`: inline when short, else a slice of `buf`'s
    /// buffer (no copy).
    ///
    /// # Panics
    /// When `sub` is not within `buf`'s text (as [`Bytes::slice_ref`]).
    pub(crate) fn slice_of(buf: &ByteString, sub: &str) -> Str {
        if sub.len() <= INLINE {
            Str(Repr::Inline(SmolStr::new(sub)))
        } else {
            Str(Repr::Shared(buf.slice_ref(sub)))
        }
    }
}

impl Default for Str {
    fn default() -> Str {
        Str::new()
    }
}

impl Deref for Str {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        self
    }
}

impl AsRef<[u8]> for Str {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Borrow<str> for Str {
    fn borrow(&self) -> &str {
        self
    }
}

impl From<&str> for Str {
    /// Copies the text.
    fn from(s: &str) -> Str {
        if s.len() <= INLINE {
            Str(Repr::Inline(SmolStr::new(s)))
        } else {
            Str(Repr::Shared(ByteString::from(s)))
        }
    }
}

impl From<&String> for Str {
    /// Copies the text.
    fn from(s: &String) -> Str {
        Str::from(s.as_str())
    }
}

impl From<String> for Str {
    /// Takes over the text's allocation when it is too long to be held inline.
    fn from(s: String) -> Str {
        if s.len() <= INLINE {
            Str(Repr::Inline(SmolStr::new(&s)))
        } else {
            Str(Repr::Shared(ByteString::from(s)))
        }
    }
}

impl From<Box<str>> for Str {
    fn from(s: Box<str>) -> Str {
        Str::from(String::from(s))
    }
}

impl From<std::borrow::Cow<'_, str>> for Str {
    fn from(s: std::borrow::Cow<'_, str>) -> Str {
        match s {
            std::borrow::Cow::Borrowed(s) => Str::from(s),
            std::borrow::Cow::Owned(s) => Str::from(s),
        }
    }
}

impl From<Str> for String {
    fn from(s: Str) -> String {
        s.as_str().to_owned()
    }
}

impl TryFrom<Bytes> for Str {
    type Error = std::str::Utf8Error;

    /// Checks that `b` is UTF-8; short text is copied inline, longer text keeps `b`.
    fn try_from(b: Bytes) -> Result<Str, std::str::Utf8Error> {
        if b.len() <= INLINE {
            Ok(Str(Repr::Inline(SmolStr::new(std::str::from_utf8(&b)?))))
        } else {
            Ok(Str(Repr::Shared(ByteString::try_from(b)?)))
        }
    }
}

impl<T: AsRef<str> + ?Sized> PartialEq<T> for Str {
    fn eq(&self, other: &T) -> bool {
        self.as_str() == other.as_ref()
    }
}

impl Eq for Str {}

impl TryFrom<&[u8]> for Str {
    type Error = std::str::Utf8Error;

    /// Checks that `b` is UTF-8 and copies it.
    fn try_from(b: &[u8]) -> Result<Str, std::str::Utf8Error> {
        std::str::from_utf8(b).map(Str::from)
    }
}

impl TryFrom<Vec<u8>> for Str {
    type Error = std::string::FromUtf8Error;

    /// Checks that `v` is UTF-8; long text keeps `v`'s allocation.
    fn try_from(v: Vec<u8>) -> Result<Str, std::string::FromUtf8Error> {
        String::from_utf8(v).map(Str::from)
    }
}

impl From<Str> for Bytes {
    fn from(s: Str) -> Bytes {
        s.into_bytes()
    }
}

impl PartialEq<Str> for str {
    fn eq(&self, other: &Str) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Str> for &str {
    fn eq(&self, other: &Str) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Str> for String {
    fn eq(&self, other: &Str) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialOrd for Str {
    fn partial_cmp(&self, other: &Str) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Str {
    fn cmp(&self, other: &Str) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Str {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl Serialize for Str {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self)
    }
}

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Str, D::Error> {
        String::deserialize(d).map(Str::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_inline_and_long_text_shares_its_buffer() {
        let short = Str::try_from(Bytes::from_static(b"default")).unwrap();
        assert!(!short.is_shared());
        let long_text = "a".repeat(INLINE + 1);
        let b = Bytes::from(long_text.clone());
        let long = Str::try_from(b.clone()).unwrap();
        assert!(long.is_shared());
        assert_eq!(long.as_ptr(), b.as_ptr());
        assert_eq!(long, long_text);
        let exact = "b".repeat(INLINE);
        assert!(!Str::from(exact.as_str()).is_shared());
        assert!(!Str::from(exact).is_shared());
        assert!(Str::from(long_text).is_shared());
    }

    #[test]
    fn compares_and_hashes_as_its_text_whatever_the_representation() {
        use std::collections::hash_map::DefaultHasher;
        let text = "x".repeat(40);
        let shared = Str::try_from(Bytes::from(text.clone())).unwrap();
        let from_str = Str::from(text.as_str());
        assert_eq!(shared, from_str);
        let h = |s: &Str| {
            let mut h = DefaultHasher::new();
            s.hash(&mut h);
            h.finish()
        };
        let mut h2 = DefaultHasher::new();
        text.as_str().hash(&mut h2);
        assert_eq!(h(&shared), h2.finish());
        let (a, b) = (Str::from("a"), Str::from("b".repeat(30)));
        assert!(a < b && b.is_shared());
        assert_eq!(Str::default(), "");
        assert_eq!(format!("{:?}", Str::from("a\"b")), "\"a\\\"b\"");
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn is_as_large_as_a_bytes_slice() {
        assert_eq!(std::mem::size_of::<Str>(), 32);
    }

    #[test]
    fn rejects_invalid_utf8_of_any_length() {
        assert!(Str::try_from(Bytes::from_static(b"ab\xc3")).is_err());
        let mut long = vec![b'a'; 40];
        long.push(0xff);
        assert!(Str::try_from(Bytes::from(long)).is_err());
    }

    #[test]
    fn slice_of_keeps_the_buffer_only_for_long_text() {
        let text = format!("{{\"name\":\"web\",\"uid\":\"{}\"}}", "u".repeat(36));
        let buf = ByteString::from(text.clone());
        let name = Str::slice_of(&buf, &buf[9..12]);
        assert_eq!(name, "web");
        assert!(!name.is_shared());
        let uid = Str::slice_of(&buf, &buf[21..57]);
        assert!(uid.is_shared());
        assert_eq!(uid.as_ptr(), buf[21..].as_ptr());
    }

    #[test]
    fn static_text_and_bytes_conversions() {
        let long = "kubernetes.io/config.seen-by-kubelet";
        let s = Str::from_static(long);
        assert!(s.is_shared());
        assert_eq!(s.as_ptr(), long.as_ptr());
        assert_eq!(s.clone().into_bytes(), long.as_bytes());
        assert_eq!(Bytes::from(Str::from_static("ns")), &b"ns"[..]);
        assert_eq!(Str::try_from(&b"abc"[..]).unwrap(), "abc");
        assert!(Str::try_from(vec![0xc3]).is_err());
        assert_eq!(s, String::from(long));
        assert_eq!(s, &String::from(long));
        assert_eq!(s, *long);
        assert_eq!(long, s);
    }

    #[test]
    fn round_trips_through_serde() {
        let s: Str = serde_json::from_str("\"kube-system\"").unwrap();
        assert_eq!(s, "kube-system");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"kube-system\"");
    }
}
