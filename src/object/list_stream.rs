//! [`ListStream`]: a list (protobuf or JSON) decoded as its body arrives, item by item, so
//! that a large unpaginated list (what an API server's watch cache serves for a relist at a
//! resourceVersion) is never held whole.

use std::sync::Arc;

use bytes::{Buf, Bytes};

use super::DecodeError;
use super::encoding::MAGIC;
use super::list::{ObjectList, decode_list, read_list_meta};
use super::list_stream_json::JsonListStream;
use super::meta::GroupVersionKind;
use super::protobuf::{decode_bare, read_type_meta};
use super::protowire::{Reader, WT_I32, WT_I64, WT_LEN, WT_VARINT};
use super::value::Object;
use super::varint::{self, MAX_LEN, VarintError};

/// Decodes a list response fed in chunks (as the HTTP body arrives), handing out its items as
/// soon as each is complete; [`finish`](Self::finish) then gives the list's metadata.
///
/// A protobuf list (`k8s\0` envelope around `{1 ListMeta, 2 items}`) is decoded as it comes:
/// an item that lies within one chunk is a zero-copy slice of it, one that straddles chunks is
/// gathered into a buffer of exactly its length (allocated once its length prefix passed the
/// item limit). Nothing else is kept, so the memory a list takes while it arrives is a chunk
/// and one item, not the list. A JSON list (custom resources) is cut into its items the same
/// way: an item is handed out once complete when its kind is known (it names its own, or the
/// list named its kind before its items); the list's other members are kept apart and read
/// at the end.
///
/// For every input it accepts, the result is what [`decode_list`] returns for the same bytes
/// whole (the items handed out, in order, then the metadata). It is stricter in three shapes
/// no API server writes, which it rejects with a typed error: a second `raw` field in the
/// envelope, a `typeMeta` after the `raw` field, and a second `ListMeta` in the list. Offsets
/// in errors count from the start of the body (a JSON syntax error among the list's own
/// members after its items names its line and column in the document without its items).
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use bytes::Bytes;
/// use informer::object::{
///     Encoding, GroupVersionKind, ListStream, Object, ObjectMeta, decode_list,
///     encode_list_protobuf,
/// };
/// // Two Pods whose messages hold only `metadata.name`.
/// let pod = |name: u8| {
///     let gvk = Arc::new(GroupVersionKind::new("", "v1", "Pod"));
///     let raw = Bytes::from(vec![0x0a, 3, 0x0a, 1, name]);
///     Object::from_parts(gvk, ObjectMeta::default(), raw, Encoding::Protobuf)
/// };
/// let (a, b) = (pod(b'a'), pod(b'b'));
/// let list_gvk = GroupVersionKind::new("", "v1", "PodList");
/// let body = encode_list_protobuf(&list_gvk, "42", "", None, &[&a, &b]).unwrap();
///
/// let mut stream = ListStream::new(1 << 20);
/// let mut items = Vec::new();
/// for chunk in body.chunks(7) {
///     items.extend(stream.feed(Bytes::copy_from_slice(chunk)).unwrap());
/// }
/// let list = stream.finish().unwrap();
/// assert_eq!(list.resource_version, "42");
/// assert_eq!(items[1].name(), "b");
/// assert_eq!(items, decode_list(body).unwrap().items);
/// ```
#[derive(Debug)]
pub struct ListStream {
    /// Largest item (or metadata field) accepted, in bytes.
    limit: usize,
    /// Body offset of the next byte not consumed (bytes in `held` are not consumed yet).
    offset: u64,
    /// Bytes of a header or field that straddles chunks.
    held: Vec<u8>,
    step: Step,
    /// Inside `raw` (the list message), up to this body offset.
    raw_end: Option<u64>,
    raw_seen: bool,
    /// `typeMeta`'s `apiVersion` and `kind` so far (each occurrence overwrites what it holds).
    type_meta: (String, String),
    /// The list's kind and its items' kind, fixed when `raw` begins.
    kinds: Option<(GroupVersionKind, Arc<GroupVersionKind>)>,
    meta: ObjectList,
    meta_seen: bool,
    /// A JSON body's reader, once the first bytes said it is one.
    json: Option<Box<JsonListStream>>,
}

/// What the next bytes are.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// The first four bytes: `k8s\0`, or the start of a JSON document.
    Magic,
    /// A field's tag (and its length or varint value).
    Header,
    /// A field's payload of `len` bytes, starting at body offset `at`.
    Payload { field: Field, len: usize, at: u64 },
    /// Bytes to pass over without keeping them.
    Skip { left: u64 },
    /// An error was returned: the body cannot be read further.
    Failed,
}

/// A field whose payload is being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    TypeMeta,
    ContentString(u32),
    ListMeta,
    Item,
}

/// A parsed field header.
struct Header {
    number: u32,
    wire_type: u8,
    tag_offset: u64,
    /// The length (wire type 2) or the value (wire type 0); 0 otherwise.
    value: u64,
    /// Where the length prefix starts.
    value_offset: u64,
    /// Bytes the tag and value take.
    len: usize,
}

impl ListStream {
    /// A decoder that accepts items (and metadata fields) of up to `limit` bytes; a longer
    /// one fails with [`DecodeError::FrameTooLarge`] before anything is allocated for it.
    pub fn new(limit: usize) -> Self {
        ListStream {
            limit,
            offset: 0,
            held: Vec::new(),
            step: Step::Magic,
            raw_end: None,
            raw_seen: false,
            type_meta: (String::new(), String::new()),
            kinds: None,
            meta: ObjectList {
                list_gvk: GroupVersionKind::default(),
                resource_version: String::new(),
                continue_token: String::new(),
                remaining_item_count: None,
                items: Vec::new(),
            },
            meta_seen: false,
            json: None,
        }
    }

    /// Feeds the next chunk of the body; returns the items it completed, in list order.
    ///
    /// # Errors
    /// Any [`DecodeError`] of the bytes so far; the stream is then unusable (feed no more).
    pub fn feed(&mut self, chunk: Bytes) -> Result<Vec<Object>, DecodeError> {
        // Error offsets never point past the bytes fed so far.
        let fed = self.offset + (self.held.len() + chunk.len()) as u64;
        let result = self.read(chunk);
        if result.is_err() {
            self.step = Step::Failed;
            self.held = Vec::new();
        }
        result.map_err(|e| e.capped(fed))
    }

    fn read(&mut self, mut chunk: Bytes) -> Result<Vec<Object>, DecodeError> {
        if matches!(self.step, Step::Failed) {
            return Err(failed(self.offset));
        }
        if let Some(json) = &mut self.json {
            return json.feed(chunk);
        }
        let mut items = Vec::new();
        while !chunk.is_empty() {
            match self.step {
                Step::Failed => return Err(failed(self.offset)),
                Step::Magic => {
                    // The first chunk is looked at, not split, when it is JSON: a JSON item
                    // that lies within it is then a slice of it.
                    if self.held.is_empty()
                        && chunk.len() >= MAGIC.len()
                        && chunk[..MAGIC.len()] != MAGIC
                    {
                        return self.json_begins(None, chunk);
                    }
                    let Some(magic) = self.take(&mut chunk, MAGIC.len()) else {
                        break;
                    };
                    if magic[..] != MAGIC {
                        return self.json_begins(Some(magic), chunk);
                    }
                    self.step = Step::Header;
                }
                Step::Header => {
                    let Some(h) = self.header(&mut chunk)? else {
                        break;
                    };
                    self.step = match self.after_header(&h)? {
                        // Empty: complete already, even if no byte follows in this body.
                        Step::Payload { field, len: 0, at } => {
                            items.extend(self.payload(field, Bytes::new(), at)?);
                            Step::Header
                        }
                        Step::Skip { left: 0 } => Step::Header,
                        step => step,
                    };
                }
                Step::Payload { field, len, at } => {
                    let Some(payload) = self.take(&mut chunk, len) else {
                        break;
                    };
                    if let Some(item) = self.payload(field, payload, at)? {
                        items.push(item);
                    }
                    self.step = Step::Header;
                }
                Step::Skip { left } => {
                    let n = left.min(chunk.len() as u64);
                    chunk.advance(n as usize);
                    self.offset += n;
                    self.step = if n == left {
                        Step::Header
                    } else {
                        Step::Skip { left: left - n }
                    };
                }
            }
            self.leave_raw_at_its_end();
        }
        Ok(items)
    }

    /// The list's resourceVersion, once its `ListMeta` has been read (an API server writes
    /// it before the items, so it is known before the first item is handed out); `None`
    /// before that. A JSON list names it when its `metadata` precedes its items (built-in
    /// lists); a custom resource's list, whose members the API server writes sorted by name,
    /// names it only at the end, so this stays `None` and [`finish`](Self::finish) gives it.
    pub fn resource_version(&self) -> Option<&str> {
        if let Some(json) = &self.json {
            return json.resource_version();
        }
        self.meta_seen
            .then_some(self.meta.resource_version.as_str())
    }

    /// Ends the body: the list's kind and metadata. Its items were all handed out by
    /// [`feed`](Self::feed), but for the items of a JSON list that name no kind of their own
    /// and came before the list named its kind (no API server writes such a list): those
    /// are here, in order, after what `feed` handed out.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`] when the body ended inside the envelope's fields or the
    /// list; [`DecodeError::Missing`] without a `raw` field; a JSON list's errors.
    pub fn finish(self) -> Result<ObjectList, DecodeError> {
        if matches!(self.step, Step::Failed) {
            return Err(failed(self.offset));
        }
        if let Some(json) = self.json {
            return json.finish();
        }
        let ended_inside =
            !self.held.is_empty() || !matches!(self.step, Step::Header) || self.raw_end.is_some();
        if ended_inside {
            if matches!(self.step, Step::Magic) {
                // Fewer than four bytes: whatever they are, `decode_list` names the error.
                return decode_list(Bytes::from(self.held));
            }
            let end = self.offset + self.held.len() as u64;
            return Err(DecodeError::Truncated {
                offset: self.raw_end.map_or(end, |e| e.min(end)),
                context: if self.raw_end.is_some() {
                    "List"
                } else {
                    "runtime.Unknown"
                },
            });
        }
        if !self.raw_seen {
            return Err(DecodeError::Missing {
                what: "runtime.Unknown raw (field 2)",
                offset: 4,
            });
        }
        let mut meta = self.meta;
        if let Some((list_gvk, _)) = self.kinds {
            meta.list_gvk = list_gvk;
        }
        Ok(meta)
    }

    /// The body is JSON: `first` (its first bytes, when they came apart) and `chunk` go to a
    /// [`JsonListStream`] from now on.
    fn json_begins(
        &mut self,
        first: Option<Bytes>,
        chunk: Bytes,
    ) -> Result<Vec<Object>, DecodeError> {
        let json = self.json.insert(Box::new(JsonListStream::new(self.limit)));
        let mut items = match first {
            Some(first) => json.feed(first)?,
            None => Vec::new(),
        };
        items.extend(json.feed(chunk)?);
        Ok(items)
    }

    /// `n` contiguous bytes from `held` and `chunk`: a slice of `chunk` when it holds them
    /// all, else gathered into `held` (`None` until complete). `n` was checked against the
    /// limit by the caller.
    fn take(&mut self, chunk: &mut Bytes, n: usize) -> Option<Bytes> {
        if self.held.is_empty() && chunk.len() >= n {
            self.offset += n as u64;
            return Some(chunk.split_to(n));
        }
        let k = (n - self.held.len()).min(chunk.len());
        // Up to `EXACT` bytes, reserved at once from the length prefix (one allocation, as for
        // nearly every object); a larger field grows as its bytes arrive (doubling, never past
        // `n`), so that a few bytes of a server cannot make us allocate the whole limit. Either
        // way the buffer ends at `n` exactly: no spare capacity is handed out.
        const EXACT: usize = 64 << 10;
        let need = self.held.len() + k;
        if self.held.capacity() < need {
            let to = if n <= EXACT {
                n
            } else {
                (2 * self.held.capacity()).max(need).min(n)
            };
            self.held.reserve_exact(to - self.held.len());
        }
        self.held.extend_from_slice(&chunk[..k]);
        chunk.advance(k);
        if self.held.len() < n {
            return None;
        }
        self.offset += n as u64;
        Some(Bytes::from(std::mem::take(&mut self.held)))
    }

    /// Parses the next field header from `held` and `chunk`; `None` when the chunk ends
    /// first (its bytes are then held).
    fn header(&mut self, chunk: &mut Bytes) -> Result<Option<Header>, DecodeError> {
        // A header is at most two varints. Inside `raw` it may not run past its end.
        let room = self
            .raw_end
            .map_or(u64::MAX, |end| end.saturating_sub(self.offset));
        let held = self.held.len();
        let mut view: Vec<u8>;
        let bytes: &[u8] = if held == 0 {
            chunk
        } else {
            view = std::mem::take(&mut self.held);
            view.extend_from_slice(&chunk[..chunk.len().min(2 * MAX_LEN)]);
            &view
        };
        let visible = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let bytes = &bytes[..visible];
        match parse_header(bytes, self.offset) {
            Ok(Some(h)) => {
                chunk.advance(h.len - held);
                self.offset += h.len as u64;
                Ok(Some(h))
            }
            // The header runs past the end of `raw`: no later chunk can complete it.
            Ok(None) if visible as u64 == room => Err(DecodeError::Truncated {
                offset: self.raw_end.unwrap_or(self.offset),
                context: "field tag",
            }),
            Ok(None) => {
                // Keep what was seen; the next chunk completes it.
                let from_chunk = bytes.len() - held;
                self.held = bytes.to_vec();
                chunk.advance(from_chunk);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// What follows a header, after checking it as the decoder of the whole body would.
    fn after_header(&mut self, h: &Header) -> Result<Step, DecodeError> {
        let in_raw = self.raw_end.is_some();
        let message = if in_raw { "List" } else { "runtime.Unknown" };
        let wrong = |expected: u8| DecodeError::WrongWireType {
            message,
            field: h.number,
            offset: h.tag_offset,
            wire_type: h.wire_type,
            expected,
        };
        if h.wire_type != WT_LEN {
            // Every field this decoder reads is length-delimited; others are passed over.
            let known = if in_raw {
                matches!(h.number, 1 | 2)
            } else {
                matches!(h.number, 1..=4)
            };
            if known {
                return Err(wrong(WT_LEN));
            }
            let left = match h.wire_type {
                WT_VARINT => return Ok(Step::Header),
                WT_I64 => 8,
                _ => 4,
            };
            if let Some(end) = self.raw_end
                && end - self.offset < left
            {
                return Err(DecodeError::Truncated {
                    offset: end,
                    context: "fixed-width field",
                });
            }
            return Ok(Step::Skip { left });
        }
        if let Some(end) = self.raw_end
            && h.value > end - self.offset
        {
            return Err(DecodeError::LengthOverrun {
                message,
                field: h.number,
                offset: h.value_offset,
                len: h.value,
                available: end - self.offset,
            });
        }
        let field = match (in_raw, h.number) {
            (false, 2) => {
                if self.raw_seen {
                    return Err(DecodeError::Unsupported {
                        what: "a second runtime.Unknown raw (field 2) in a list",
                        offset: h.tag_offset,
                    });
                }
                self.raw_seen = true;
                // Saturating: a length past any body ends it inside `raw` (truncated).
                self.raw_end = Some(self.offset.saturating_add(h.value));
                let list = GroupVersionKind::from_api_version(&self.type_meta.0, &self.type_meta.1);
                let item = Arc::new(list.item_of_list());
                self.kinds = Some((list, item));
                return Ok(Step::Header);
            }
            (false, 1) => Field::TypeMeta,
            (false, n @ (3 | 4)) => Field::ContentString(n),
            (true, 1) => Field::ListMeta,
            (true, 2) => Field::Item,
            _ => return Ok(Step::Skip { left: h.value }),
        };
        if h.value > self.limit as u64 {
            return Err(DecodeError::FrameTooLarge {
                offset: h.value_offset,
                len: h.value,
                limit: self.limit,
            });
        }
        Ok(Step::Payload {
            field,
            len: h.value as usize,
            at: self.offset,
        })
    }

    /// Handles a complete payload that started at body offset `at`.
    fn payload(
        &mut self,
        field: Field,
        payload: Bytes,
        at: u64,
    ) -> Result<Option<Object>, DecodeError> {
        let shift = |e: DecodeError| e.shifted(at);
        match field {
            Field::Item => {
                // Entering `raw` set the kinds.
                let gvk = self
                    .kinds
                    .as_ref()
                    .map_or_else(Default::default, |(_, item)| item.clone());
                return decode_bare(gvk, payload).map(Some).map_err(shift);
            }
            Field::ListMeta => {
                // Merged, a later one could name an older version than the one the reflector
                // checked before passing the items between them on.
                if self.meta_seen {
                    return Err(DecodeError::Unsupported {
                        what: "a second ListMeta (field 1) in a list",
                        offset: at,
                    });
                }
                let r = Reader::new(&payload, 0, payload.len(), "ListMeta");
                read_list_meta(r, &mut self.meta).map_err(shift)?;
                self.meta_seen = true;
            }
            Field::TypeMeta => {
                if self.raw_seen {
                    return Err(DecodeError::Unsupported {
                        what: "a list's runtime.Unknown typeMeta (field 1) after its raw (field 2)",
                        offset: at,
                    });
                }
                let (was_api_version, was_kind) = std::mem::take(&mut self.type_meta);
                let (mut api_version, mut kind) = (was_api_version.as_str(), was_kind.as_str());
                let r = Reader::new(&payload, 0, payload.len(), "runtime.TypeMeta");
                read_type_meta(r, &mut api_version, &mut kind).map_err(shift)?;
                self.type_meta = (api_version.to_owned(), kind.to_owned());
            }
            Field::ContentString(field) => {
                if std::str::from_utf8(&payload).is_err() {
                    return Err(DecodeError::InvalidUtf8 {
                        message: "runtime.Unknown",
                        field,
                        offset: at,
                    });
                }
            }
        }
        Ok(None)
    }

    /// At the end of `raw`, back to the envelope's fields.
    fn leave_raw_at_its_end(&mut self) {
        if self.raw_end == Some(self.offset) && matches!(self.step, Step::Header) {
            self.raw_end = None;
        }
    }
}

/// A field header at the start of `b` (body offset `at`): `None` when `b` ends first.
fn parse_header(b: &[u8], at: u64) -> Result<Option<Header>, DecodeError> {
    let (tag, n) = match varint::read(b) {
        Ok(v) => v,
        Err(VarintError::Truncated) => return Ok(None),
        Err(VarintError::Overflow) => return Err(DecodeError::BadVarint { offset: at }),
    };
    let number = u32::try_from(tag >> 3).unwrap_or(u32::MAX);
    let wire_type = (tag & 7) as u8;
    if number == 0 || !matches!(wire_type, WT_VARINT | WT_I64 | WT_LEN | WT_I32) {
        return Err(DecodeError::BadTag {
            offset: at,
            field: number,
            wire_type,
        });
    }
    let value_offset = at + n as u64;
    if !matches!(wire_type, WT_VARINT | WT_LEN) {
        return Ok(Some(Header {
            number,
            wire_type,
            tag_offset: at,
            value: 0,
            value_offset,
            len: n,
        }));
    }
    match varint::read(&b[n..]) {
        Ok((value, m)) => Ok(Some(Header {
            number,
            wire_type,
            tag_offset: at,
            value,
            value_offset,
            len: n + m,
        })),
        Err(VarintError::Truncated) => Ok(None),
        Err(VarintError::Overflow) => Err(DecodeError::BadVarint {
            offset: value_offset,
        }),
    }
}

/// The error of a stream used after it failed.
fn failed(offset: u64) -> DecodeError {
    DecodeError::Unsupported {
        what: "reading on after an error (the list stream stopped at its first error)",
        offset,
    }
}
