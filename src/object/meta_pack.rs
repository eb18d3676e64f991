//! [`Counts`] and [`Packer`]: the packed layout of an `ObjectMeta`'s strings and words.

use super::meta_view::{
    OWNER_BLOCKS, OWNER_BLOCKS_SET, OWNER_CONTROLLER, OWNER_CONTROLLER_SET, SINGLE_STRINGS,
};

/// Words at the start of an `ObjectMeta`'s `ends` that hold its [`Counts`].
pub(super) const COUNT_WORDS: usize = 4;

/// How many of each repeated field an `ObjectMeta` holds. Its packed words (`single`, then
/// `ends` after the counts themselves) are, in order, the five single strings (namespace,
/// name, generateName, uid, resourceVersion), `labels` key/value pairs, `annotations` pairs,
/// `owners` × (apiVersion, kind, name, uid), `finalizers`, then `owners` flags words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) labels: u32,
    pub(crate) annotations: u32,
    pub(crate) owners: u32,
    pub(crate) finalizers: u32,
}

impl Counts {
    /// Counts of these lengths (each at most `u32::MAX`; no API server sends more).
    pub(crate) fn new(labels: usize, annotations: usize, owners: usize, finalizers: usize) -> Self {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Counts {
            labels: count(labels),
            annotations: count(annotations),
            owners: count(owners),
            finalizers: count(finalizers),
        }
    }

    pub(super) fn labels_at(self) -> usize {
        SINGLE_STRINGS
    }
    pub(super) fn annotations_at(self) -> usize {
        self.labels_at() + 2 * self.labels as usize
    }
    pub(super) fn owners_at(self) -> usize {
        self.annotations_at() + 2 * self.annotations as usize
    }
    pub(super) fn finalizers_at(self) -> usize {
        self.owners_at() + 4 * self.owners as usize
    }
    pub(super) fn flags_at(self) -> usize {
        self.finalizers_at() + self.finalizers as usize
    }
    /// How many words (string ends and owner flags) a [`Packer`] holds for these counts.
    pub(crate) fn words(self) -> usize {
        self.flags_at() + self.owners as usize
    }

    /// The counts as the first [`COUNT_WORDS`] words of an `ends` array.
    pub(super) fn to_words(self) -> [u32; COUNT_WORDS] {
        [self.labels, self.annotations, self.owners, self.finalizers]
    }

    /// The counts `words` starts with (zero for words missing: never made).
    pub(super) fn from_words(words: &[u32]) -> Self {
        let w = |i: usize| words.get(i).copied().unwrap_or(0);
        Counts {
            labels: w(0),
            annotations: w(1),
            owners: w(2),
            finalizers: w(3),
        }
    }
}

/// Builds an `ObjectMeta` from strings given in [`Counts`] order, then the owner flags words.
pub(crate) struct Packer {
    text: String,
    ends: Vec<u32>,
}

impl Packer {
    /// A packer with room for `text` bytes and `words` ends.
    pub(crate) fn with_capacity(text: usize, words: usize) -> Self {
        Packer {
            text: String::with_capacity(text),
            ends: Vec::with_capacity(words),
        }
    }

    /// Appends the next string. Strings past 4 GiB in all read as empty.
    pub(crate) fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends
            .push(u32::try_from(self.text.len()).unwrap_or(u32::MAX));
    }

    /// Appends the single strings, first of all, in their packed order (with the key's `/`).
    pub(crate) fn singles(
        &mut self,
        namespace: &str,
        name: &str,
        generate_name: &str,
        uid: &str,
        rv: &str,
    ) {
        self.push(namespace);
        if !namespace.is_empty() {
            self.text.push('/');
        }
        for s in [name, generate_name, uid, rv] {
            self.push(s);
        }
    }

    /// Appends a word that is not a string's end (an owner's flags).
    pub(crate) fn word(&mut self, w: u32) {
        self.ends.push(w);
    }

    /// The strings pushed, one after another, and the words (ends and flags) pushed.
    pub(super) fn parts(&self) -> (&str, &[u32]) {
        (&self.text, &self.ends)
    }
}

/// The flags word of an owner reference with these optional booleans.
pub(crate) fn owner_flags(controller: Option<bool>, block_owner_deletion: Option<bool>) -> u32 {
    let bits = |b: Option<bool>, set: u32, on: u32| match b {
        None => 0,
        Some(false) => set,
        Some(true) => set | on,
    };
    bits(controller, OWNER_CONTROLLER_SET, OWNER_CONTROLLER)
        | bits(block_owner_deletion, OWNER_BLOCKS_SET, OWNER_BLOCKS)
}
