//! [`LookupKey`]: what a store read by key accepts.

use std::borrow::Cow;
use std::sync::Arc;

use crate::object::{ObjectKey, key_hash};

/// A key to look an object up by: `namespace/name` (or `name`) as text, or an [`ObjectKey`],
/// which carries its hash so that the lookup skips hashing (and reading) the text. Implemented
/// for `str`, `String`, `Box<str>`, `Arc<str>`, `Cow<str>`, `ObjectKey` and references to them.
pub trait LookupKey {
    /// The key as text.
    fn key_text(&self) -> &str;

    /// [`key_hash`] of the text; an [`ObjectKey`] returns its cached hash.
    fn key_hash(&self) -> u64 {
        key_hash(self.key_text())
    }

    /// Whether `stored`, a key in the store, is this key. An [`ObjectKey`] sharing `stored`'s
    /// text allocation answers without reading the text.
    fn key_matches(&self, stored: &ObjectKey) -> bool {
        stored.as_str() == self.key_text()
    }
}

impl LookupKey for str {
    fn key_text(&self) -> &str {
        self
    }
}

impl LookupKey for String {
    fn key_text(&self) -> &str {
        self
    }
}

impl LookupKey for Box<str> {
    fn key_text(&self) -> &str {
        self
    }
}

impl LookupKey for Arc<str> {
    fn key_text(&self) -> &str {
        self
    }
}

impl LookupKey for Cow<'_, str> {
    fn key_text(&self) -> &str {
        self
    }
}

impl LookupKey for ObjectKey {
    fn key_text(&self) -> &str {
        self.as_str()
    }

    fn key_hash(&self) -> u64 {
        self.hash_value()
    }

    fn key_matches(&self, stored: &ObjectKey) -> bool {
        self == stored
    }
}

impl<T: LookupKey + ?Sized> LookupKey for &T {
    fn key_text(&self) -> &str {
        (**self).key_text()
    }

    fn key_hash(&self) -> u64 {
        (**self).key_hash()
    }

    fn key_matches(&self, stored: &ObjectKey) -> bool {
        (**self).key_matches(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_hashes_and_matches_alike() {
        let key = ObjectKey::new("ns", "pod");
        let other = ObjectKey::from_raw("ns/pod");
        assert_eq!(key.key_hash(), "ns/pod".key_hash());
        assert_eq!(key.key_hash(), String::from("ns/pod").key_hash());
        assert!(key.key_matches(&other));
        assert!("ns/pod".key_matches(&other));
        assert!(!"ns/pod2".key_matches(&other));
        assert!(!ObjectKey::from_raw("ns/po").key_matches(&other));
        assert_eq!(Cow::Borrowed("ns/pod").key_text(), "ns/pod");
    }
}
