//! The protobuf wire format by hand (as Go's `protowire`): a zero-copy [`Reader`] that knows
//! where it is (every error carries the byte offset and field number) and the `put_*` writers.
//! The reader never allocates from a length read off the wire: lengths are checked against the
//! bytes actually left before any slice is taken. (Not `crate::wire`, the prost message types.)

use bytes::Bytes;

use super::DecodeError;
use super::varint::{self, VarintError};

pub(crate) const WT_VARINT: u8 = 0;
pub(crate) const WT_I64: u8 = 1;
pub(crate) const WT_LEN: u8 = 2;
pub(crate) const WT_I32: u8 = 5;

/// One field read by [`Reader::next_field`].
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) number: u32,
    pub(crate) wire_type: u8,
    /// Offset of the tag, relative to the reader's buffer.
    pub(crate) tag_offset: usize,
}

/// Cursor over one message held in a `Bytes` (slices of it are zero-copy).
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
    end: usize,
    message: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `buf[start..end]`; offsets in errors are relative to `buf`'s start.
    pub(crate) fn new(buf: &'a Bytes, start: usize, end: usize, message: &'static str) -> Self {
        debug_assert!(start <= end && end <= buf.len());
        Reader {
            buf,
            pos: start,
            end,
            message,
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn is_done(&self) -> bool {
        self.pos >= self.end
    }

    #[inline]
    fn varint(&mut self, context: &'static str) -> Result<u64, DecodeError> {
        // Most tags and lengths of object metadata are one byte.
        if let Some(&b) = self.buf[..self.end].get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        match varint::read(&self.buf[self.pos..self.end]) {
            Ok((value, n)) => {
                self.pos += n;
                Ok(value)
            }
            // The varint runs to the end of this message: the missing byte is at `end`.
            Err(VarintError::Truncated) => Err(DecodeError::Truncated {
                offset: self.end as u64,
                context,
            }),
            Err(VarintError::Overflow) => Err(DecodeError::BadVarint {
                offset: self.pos as u64,
            }),
        }
    }

    /// Reads the next tag; `None` at the end of the message.
    pub(crate) fn next_field(&mut self) -> Result<Option<Field>, DecodeError> {
        if self.is_done() {
            return Ok(None);
        }
        let tag_offset = self.pos;
        let tag = self.varint("field tag")?;
        let number = u32::try_from(tag >> 3).unwrap_or(u32::MAX);
        let wire_type = (tag & 7) as u8;
        if number == 0 || !matches!(wire_type, WT_VARINT | WT_I64 | WT_LEN | WT_I32) {
            return Err(DecodeError::BadTag {
                offset: tag_offset as u64,
                field: number,
                wire_type,
            });
        }
        Ok(Some(Field {
            number,
            wire_type,
            tag_offset,
        }))
    }

    fn expect(&self, f: &Field, expected: u8) -> Result<(), DecodeError> {
        if f.wire_type == expected {
            Ok(())
        } else {
            Err(DecodeError::WrongWireType {
                message: self.message,
                field: f.number,
                offset: f.tag_offset as u64,
                wire_type: f.wire_type,
                expected,
            })
        }
    }

    /// Reads a length-delimited field's extent: `(start, end)` within the buffer.
    pub(crate) fn len_delimited(&mut self, f: &Field) -> Result<(usize, usize), DecodeError> {
        self.expect(f, WT_LEN)?;
        let len_offset = self.pos;
        let len = self.varint("length prefix")?;
        let available = (self.end - self.pos) as u64;
        if len > available {
            return Err(DecodeError::LengthOverrun {
                message: self.message,
                field: f.number,
                offset: len_offset as u64,
                len,
                available,
            });
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok((start, self.pos))
    }

    /// A `bytes` field as a zero-copy slice.
    pub(crate) fn bytes(&mut self, f: &Field) -> Result<Bytes, DecodeError> {
        let (s, e) = self.len_delimited(f)?;
        Ok(self.buf.slice(s..e))
    }

    /// A `string` field, UTF-8 checked.
    pub(crate) fn string(&mut self, f: &Field) -> Result<String, DecodeError> {
        Ok(self.str(f)?.to_owned())
    }

    /// A `string` field borrowed from the buffer, UTF-8 checked.
    pub(crate) fn str(&mut self, f: &Field) -> Result<&'a str, DecodeError> {
        let (s, e) = self.len_delimited(f)?;
        let buf: &'a Bytes = self.buf;
        std::str::from_utf8(&buf[s..e]).map_err(|_| DecodeError::InvalidUtf8 {
            message: self.message,
            field: f.number,
            offset: s as u64,
        })
    }

    /// A nested message: a reader over its extent.
    pub(crate) fn message(
        &mut self,
        f: &Field,
        message: &'static str,
    ) -> Result<Reader<'a>, DecodeError> {
        let (s, e) = self.len_delimited(f)?;
        Ok(Reader::new(self.buf, s, e, message))
    }

    /// A varint field as `u64`.
    pub(crate) fn uint(&mut self, f: &Field) -> Result<u64, DecodeError> {
        self.expect(f, WT_VARINT)?;
        self.varint("varint field")
    }

    /// An `int64` field (two's complement in 10 bytes when negative).
    pub(crate) fn int64(&mut self, f: &Field) -> Result<i64, DecodeError> {
        Ok(self.uint(f)? as i64)
    }

    /// An `int32` field (negative values are sign-extended to 10 bytes on the wire).
    pub(crate) fn int32(&mut self, f: &Field) -> Result<i32, DecodeError> {
        Ok(self.uint(f)? as i32)
    }

    /// A `bool` field.
    pub(crate) fn bool(&mut self, f: &Field) -> Result<bool, DecodeError> {
        Ok(self.uint(f)? != 0)
    }

    /// Skips a field of any supported wire type.
    pub(crate) fn skip(&mut self, f: &Field) -> Result<(), DecodeError> {
        let fixed = match f.wire_type {
            WT_VARINT => {
                self.varint("skipped varint")?;
                return Ok(());
            }
            WT_LEN => {
                self.len_delimited(f)?;
                return Ok(());
            }
            WT_I64 => 8,
            _ => 4,
        };
        if self.end - self.pos < fixed {
            return Err(DecodeError::Truncated {
                offset: self.end as u64,
                context: "fixed-width field",
            });
        }
        self.pos += fixed;
        Ok(())
    }
}

/// Bytes a length-delimited field of `len` payload bytes takes (tag < 16 assumed).
pub(crate) fn len_field_size(len: usize) -> usize {
    1 + varint::len(len as u64) + len
}

/// Appends a tag.
pub(crate) fn put_tag(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    varint::put(out, (u64::from(field) << 3) | u64::from(wire_type));
}

/// Appends a length-delimited field.
pub(crate) fn put_bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    put_tag(out, field, WT_LEN);
    varint::put(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// Appends a string field unless it is empty (proto2 optional written only when set; Kubernetes
/// always writes its strings, so we write empty strings too when `always` is set).
pub(crate) fn put_str(out: &mut Vec<u8>, field: u32, s: &str) {
    put_bytes(out, field, s.as_bytes());
}

/// Appends a varint field.
pub(crate) fn put_uint(out: &mut Vec<u8>, field: u32, v: u64) {
    put_tag(out, field, WT_VARINT);
    varint::put(out, v);
}

/// Appends a nested message that `f` appends to `out` (its length written in front after: one
/// byte reserved, more moved in for a message of 128 bytes or more; no buffer of its own, as
/// reading a compact object re-encodes its metadata this way).
pub(crate) fn put_message(out: &mut Vec<u8>, field: u32, f: impl FnOnce(&mut Vec<u8>)) {
    put_tag(out, field, WT_LEN);
    let at = out.len();
    out.push(0);
    f(out);
    let mut len = (out.len() - at - 1) as u64;
    let mut head = [0u8; 10];
    let mut n = 0;
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        head[n] = if len == 0 { byte } else { byte | 0x80 };
        n += 1;
        if len == 0 {
            break;
        }
    }
    out[at] = head[0];
    if n > 1 {
        out.splice(at + 1..at + 1, head[1..n].iter().copied());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_message_gets_the_length_a_separate_buffer_would_give() {
        for len in [0, 1, 127, 128, 300, 16_384, 20_000] {
            let inner = vec![7u8; len];
            let mut want = vec![1, 2];
            put_bytes(&mut want, 13, &inner);
            want.push(3);
            let mut got = vec![1, 2];
            put_message(&mut got, 13, |m| m.extend_from_slice(&inner));
            got.push(3);
            assert_eq!(got, want, "{len}");
        }
    }
}
