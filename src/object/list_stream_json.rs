//! [`JsonListStream`]: a JSON list cut into its items as its body arrives (the JSON half of
//! [`ListStream`](super::ListStream)).

use std::sync::Arc;

use bytes::Bytes;
use memchr::memchr2;

use super::DecodeError;
use super::list::{ObjectList, decode_json_item, decode_list};
use super::meta::GroupVersionKind;
use super::value::Object;

/// Splits a JSON list document (`{"kind":…,"apiVersion":…,"metadata":{…},"items":[{…},…]}`,
/// members in any order) into its items as chunks arrive. Everything but the items is kept as
/// the *skeleton* (the document with `"items":[]`), which [`decode_list`] reads at the end, so
/// the list's own members are checked exactly as a whole-body decode checks them; each item
/// is checked by the item decoder. Only the skeleton and one item that straddles chunks are
/// held.
///
/// An item is handed out as soon as it is complete when its kind is known: it names its own
/// `apiVersion` and `kind` (custom resources do), or the list named both before its items
/// (built-in lists, whose members Go writes in the order above). Otherwise it waits for the
/// end, with every item after it (their order is kept). The list's resourceVersion is known
/// early when its `metadata` precedes the items; the API server writes a custom resource's
/// list with sorted member names (`apiVersion`, `items`, `kind`, `metadata`), so for those it
/// is known only at the end.
#[derive(Debug)]
pub(super) struct JsonListStream {
    /// Largest item, and largest skeleton, accepted (bytes).
    limit: usize,
    /// Body offset of the first byte of the chunk being read.
    offset: u64,
    skeleton: Vec<u8>,
    mode: Mode,
    /// The bytes outside the items, lexically.
    outer: Lexer,
    /// At depth 1: the next string is a member's name.
    want_name: bool,
    /// Where in the skeleton the member name being read starts.
    name_start: Option<usize>,
    /// The last member name read at depth 1 was `items`.
    named_items: bool,
    items_seen: bool,
    /// The item being read, lexically, and its bytes so far when it straddles chunks.
    inner: Lexer,
    item: Vec<u8>,
    item_at: u64,
    /// The items' kind, when the list named it before its items.
    item_gvk: Option<Arc<GroupVersionKind>>,
    resource_version: Option<String>,
    /// Items that name no kind, read before the list's kind is known (with every later item).
    pending: Vec<(Bytes, u64)>,
}

/// Where the reader is in the document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Whitespace before the document.
    Lead,
    /// Inside the top-level object, outside its items.
    Members,
    /// After the `items` member's colon, before its value.
    ItemsValue,
    /// Inside the items array, between items.
    Between(Want),
    /// Inside an item.
    Item,
    /// After the top-level object, or a document that is not an object: kept as it comes.
    Tail,
}

/// What may come next between items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// An item or `]` (just after `[`).
    FirstOrEnd,
    /// `,` or `]` (after an item).
    CommaOrEnd,
    /// An item (after `,`).
    Item,
}

/// Nesting depth and string state of JSON text read byte by byte.
#[derive(Clone, Copy, Debug, Default)]
struct Lexer {
    depth: u32,
    string: bool,
    escaped: bool,
}

impl Lexer {
    /// Reads `b` as the continuation of a value that began at depth 0; returns how many bytes
    /// of `b` finish it (the closing bracket included), or `None` when it goes on past `b`.
    fn finish_value(&mut self, b: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < b.len() {
            if self.escaped {
                self.escaped = false;
                i += 1;
                continue;
            }
            if self.string {
                // Most of an object's text is strings: jump to the next quote or backslash.
                let j = i + memchr2(b'"', b'\\', &b[i..])?;
                if b[j] == b'\\' {
                    self.escaped = true;
                } else {
                    self.string = false;
                }
                i = j + 1;
                continue;
            }
            match b[i] {
                b'"' => self.string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        None
    }

    /// Reads one byte outside the items; returns whether it ended a string.
    fn step(&mut self, c: u8) -> bool {
        if self.escaped {
            self.escaped = false;
        } else if self.string {
            match c {
                b'\\' => self.escaped = true,
                b'"' => {
                    self.string = false;
                    return true;
                }
                _ => {}
            }
        } else {
            match c {
                b'"' => self.string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        false
    }
}

/// JSON's insignificant whitespace.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// A JSON error of the stream's own, at body offset `offset`.
fn syntax(offset: u64, message: &str) -> DecodeError {
    DecodeError::Json {
        offset,
        line: 1,
        column: 1,
        message: message.to_owned(),
    }
}

impl JsonListStream {
    pub(super) fn new(limit: usize) -> Self {
        JsonListStream {
            limit,
            offset: 0,
            skeleton: Vec::new(),
            mode: Mode::Lead,
            outer: Lexer::default(),
            want_name: false,
            name_start: None,
            named_items: false,
            items_seen: false,
            inner: Lexer::default(),
            item: Vec::new(),
            item_at: 0,
            item_gvk: None,
            resource_version: None,
            pending: Vec::new(),
        }
    }

    /// The list's resourceVersion, once its `metadata` was read before its items.
    pub(super) fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// Reads the next chunk; returns the items it completed whose kind is known, in order.
    pub(super) fn feed(&mut self, chunk: Bytes) -> Result<Vec<Object>, DecodeError> {
        let mut items = Vec::new();
        let b: &[u8] = &chunk;
        let mut i = 0;
        while i < b.len() {
            let at = self.offset + i as u64;
            match self.mode {
                Mode::Tail => {
                    self.keep(&b[i..], at)?;
                    i = b.len();
                }
                Mode::Lead => {
                    let c = b[i];
                    self.keep(&b[i..=i], at)?;
                    i += 1;
                    if c == b'{' {
                        self.outer.depth = 1;
                        self.want_name = true;
                        self.mode = Mode::Members;
                    } else if !is_space(c) {
                        // Not an object: `decode_list` names the error at the end.
                        self.mode = Mode::Tail;
                    }
                }
                Mode::Members => i = self.members(b, i)?,
                Mode::ItemsValue => {
                    let c = b[i];
                    if is_space(c) {
                        self.keep(&b[i..=i], at)?;
                        i += 1;
                    } else if c == b'[' {
                        self.keep(b"[", at)?;
                        i += 1;
                        self.items_begin()?;
                        self.mode = Mode::Between(Want::FirstOrEnd);
                    } else {
                        // Not an array (`null`, or wrong): left to `decode_list`.
                        self.mode = Mode::Members;
                    }
                }
                Mode::Between(want) => {
                    match (b[i], want) {
                        (c, _) if is_space(c) => {}
                        (b']', Want::FirstOrEnd | Want::CommaOrEnd) => {
                            self.keep(b"]", at)?;
                            self.mode = Mode::Members;
                        }
                        (b',', Want::CommaOrEnd) => self.mode = Mode::Between(Want::Item),
                        (b']', Want::Item) => {
                            return Err(syntax(at, "a list's items end with a comma"));
                        }
                        (b'{', Want::FirstOrEnd | Want::Item) => {
                            self.item_at = at;
                            self.inner = Lexer::default();
                            self.mode = Mode::Item;
                            continue;
                        }
                        (_, Want::CommaOrEnd) => {
                            return Err(syntax(at, "expected `,` or `]` after a list item"));
                        }
                        (_, _) => return Err(syntax(at, "a list item is not a JSON object")),
                    }
                    i += 1;
                }
                Mode::Item => {
                    let ends = self.inner.finish_value(&b[i..]);
                    let end = ends.map_or(b.len(), |n| i + n);
                    let len = self.item.len() + (end - i);
                    if len > self.limit {
                        return Err(DecodeError::FrameTooLarge {
                            offset: self.item_at,
                            len: len as u64,
                            limit: self.limit,
                        });
                    }
                    let raw = if ends.is_none() {
                        self.gather(&b[i..]);
                        None
                    } else if self.item.is_empty() {
                        Some(chunk.slice(i..end))
                    } else {
                        self.gather(&b[i..end]);
                        // The cache may keep these bytes: no spare capacity.
                        self.item.shrink_to_fit();
                        Some(Bytes::from(std::mem::take(&mut self.item)))
                    };
                    i = end;
                    if let Some(raw) = raw {
                        self.mode = Mode::Between(Want::CommaOrEnd);
                        self.item_done(raw, &mut items)?;
                    }
                }
            }
        }
        self.offset += b.len() as u64;
        Ok(items)
    }

    /// Reads members of the top-level object from `b[i..]` into the skeleton until the items
    /// begin, the object ends, or `b` does; returns where it stopped.
    fn members(&mut self, b: &[u8], mut i: usize) -> Result<usize, DecodeError> {
        while i < b.len() {
            let c = b[i];
            let at = self.offset + i as u64;
            self.keep(&b[i..=i], at)?;
            i += 1;
            let was_string = self.outer.string;
            let ended_string = self.outer.step(c);
            if self.outer.depth == 0 {
                self.mode = Mode::Tail;
                return Ok(i);
            }
            if self.outer.depth != 1 || was_string && !ended_string {
                continue;
            }
            match c {
                b'"' if ended_string => {
                    if let Some(start) = self.name_start.take() {
                        self.named_items = names_items(&self.skeleton[start..]);
                    }
                }
                b'"' if self.want_name => {
                    self.want_name = false;
                    self.name_start = Some(self.skeleton.len() - 1);
                }
                b',' => {
                    self.want_name = true;
                    self.named_items = false;
                }
                b':' if self.named_items => {
                    self.named_items = false;
                    if self.items_seen {
                        return Err(syntax(at, "duplicate field `items`"));
                    }
                    self.mode = Mode::ItemsValue;
                    return Ok(i);
                }
                _ => {}
            }
        }
        Ok(i)
    }

    /// The items array opens: what the members before it say about the list.
    fn items_begin(&mut self) -> Result<(), DecodeError> {
        self.items_seen = true;
        // The members so far, closed, read as the list would be: an error here is an error
        // of the whole document, and what they name cannot change (a member named twice is
        // an error of the whole).
        let mut prefix = Vec::with_capacity(self.skeleton.len() + 2);
        prefix.extend_from_slice(&self.skeleton);
        prefix.extend_from_slice(b"]}");
        let head = decode_list(Bytes::from(prefix))?;
        let gvk = &head.list_gvk;
        if !gvk.kind.is_empty() && !gvk.version.is_empty() {
            self.item_gvk = Some(Arc::new(gvk.item_of_list()));
        }
        if !head.resource_version.is_empty() {
            self.resource_version = Some(head.resource_version);
        }
        Ok(())
    }

    /// A complete item (`raw`, at `self.item_at`): checked and handed out, or held.
    fn item_done(&mut self, raw: Bytes, items: &mut Vec<Object>) -> Result<(), DecodeError> {
        let at = self.item_at;
        if std::str::from_utf8(&raw).is_err() {
            // serde_json names the place, as it does reading the whole list.
            return Err(
                match serde_json::from_slice::<&serde_json::value::RawValue>(&raw) {
                    Err(e) => DecodeError::json(&e, at),
                    Ok(_) => syntax(at, "invalid UTF-8 in a list item"),
                },
            );
        }
        if self.pending.is_empty()
            && let Some(item) = decode_json_item(raw.clone(), at, self.item_gvk.as_ref())?
        {
            items.push(item);
            return Ok(());
        }
        self.pending.push((raw, at));
        Ok(())
    }

    /// Appends `bytes` to the item that straddles chunks (the caller checked the limit): its
    /// buffer doubles as bytes arrive, never past the limit.
    fn gather(&mut self, bytes: &[u8]) {
        let need = self.item.len() + bytes.len();
        if self.item.capacity() < need {
            let to = (2 * self.item.capacity())
                .max(need)
                .min(self.limit.max(need));
            self.item.reserve_exact(to - self.item.len());
        }
        self.item.extend_from_slice(bytes);
    }

    /// Appends `bytes` (at body offset `at`) to the skeleton, within the limit.
    fn keep(&mut self, bytes: &[u8], at: u64) -> Result<(), DecodeError> {
        let len = self.skeleton.len() + bytes.len();
        if len > self.limit {
            return Err(DecodeError::FrameTooLarge {
                offset: at,
                len: len as u64,
                limit: self.limit,
            });
        }
        self.skeleton.extend_from_slice(bytes);
        Ok(())
    }

    /// Ends the body: the list's kind and metadata, with the items that waited for its kind.
    ///
    /// # Errors
    /// What [`decode_list`] says of the skeleton (a body that ended early among them: its
    /// line and column count in the document without its items), or of a held item.
    pub(super) fn finish(self) -> Result<ObjectList, DecodeError> {
        let mut list = decode_list(Bytes::from(self.skeleton))?;
        if !self.pending.is_empty() {
            let gvk = Arc::new(list.list_gvk.item_of_list());
            let mut items = Vec::with_capacity(self.pending.len() + list.items.len());
            for (raw, at) in self.pending {
                items.extend(decode_json_item(raw, at, Some(&gvk))?);
            }
            items.append(&mut list.items);
            list.items = items;
        }
        Ok(list)
    }
}

/// Whether a member name (its JSON text, quotes included) is `items`.
fn names_items(name: &[u8]) -> bool {
    if name == b"\"items\"" {
        return true;
    }
    // Escapes (`"it\u0065ms"`) name it too, as serde reads them.
    name.contains(&b'\\') && serde_json::from_slice::<String>(name).is_ok_and(|n| n == "items")
}
