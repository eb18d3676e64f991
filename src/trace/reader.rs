//! [`TraceReader`]: reads a trace file record by record, every length checked before use.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use prost::Message;

use super::error::TraceError;
use super::format::{MAGIC, MAX_RECORD_BYTES, RecordKind, TRACE_VERSION, TraceRecord};
use crate::object::varint::{self, VarintError};

/// Reads a trace file record by record (never the whole file at once).
#[derive(Debug)]
pub struct TraceReader {
    input: BufReader<File>,
    path: PathBuf,
    offset: u64,
    resource: String,
}

impl TraceReader {
    /// Opens `path`, checks the magic and reads the header.
    ///
    /// # Errors
    /// [`TraceError::Io`], [`TraceError::BadMagic`], [`TraceError::MissingHeader`],
    /// [`TraceError::UnsupportedVersion`] and the errors of [`TraceReader::next_record`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|source| TraceError::Io {
            path: path.clone(),
            source,
        })?;
        let mut r = TraceReader {
            input: BufReader::with_capacity(1 << 20, file),
            path,
            offset: 0,
            resource: String::new(),
        };
        let mut magic = [0u8; 8];
        let got = r.read_up_to(&mut magic)?;
        if got < magic.len() || &magic != MAGIC {
            return Err(TraceError::BadMagic);
        }
        r.offset = 8;
        match r.next_record()? {
            Some((_, h)) if h.kind == RecordKind::Header as i32 => {
                if h.version != TRACE_VERSION {
                    return Err(TraceError::UnsupportedVersion { found: h.version });
                }
                r.resource = h.resource;
            }
            _ => return Err(TraceError::MissingHeader),
        }
        Ok(r)
    }

    /// The resource named in the header.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Reads into `buf` until it is full or the file ends; the bytes read.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, TraceError> {
        let mut n = 0;
        while n < buf.len() {
            match self.input.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(TraceError::Io {
                        path: self.path.clone(),
                        source,
                    });
                }
            }
        }
        Ok(n)
    }

    /// The next record and its offset; `None` at a clean end of file.
    ///
    /// # Errors
    /// [`TraceError::Truncated`], [`TraceError::BadLength`], [`TraceError::RecordTooLarge`]
    /// (checked before allocating), [`TraceError::Decode`], [`TraceError::Io`].
    pub fn next_record(&mut self) -> Result<Option<(u64, TraceRecord)>, TraceError> {
        let start = self.offset;
        // The length prefix, a byte at a time (the file is buffered) until it parses; at most
        // `varint::MAX_LEN` bytes are read for it.
        let mut prefix = [0u8; varint::MAX_LEN];
        let mut read = 0;
        let len = loop {
            if self.read_up_to(&mut prefix[read..=read])? == 0 {
                if read == 0 {
                    return Ok(None);
                }
                return Err(TraceError::Truncated {
                    offset: start,
                    context: "record length",
                });
            }
            read += 1;
            match varint::read(&prefix[..read]) {
                Ok((len, _)) => break len,
                Err(VarintError::Truncated) => {}
                Err(VarintError::Overflow) => return Err(TraceError::BadLength { offset: start }),
            }
        };
        let read = read as u64;
        if len > MAX_RECORD_BYTES {
            return Err(TraceError::RecordTooLarge {
                offset: start,
                len,
                limit: MAX_RECORD_BYTES,
            });
        }
        // `len` is at most MAX_RECORD_BYTES here, so the allocation is bounded; it is filled
        // a block at a time so a short file does not cost the whole announced length.
        let mut buf = Vec::new();
        let mut left = len as usize;
        let mut block = [0u8; 64 * 1024];
        while left > 0 {
            let want = left.min(block.len());
            let got = self.read_up_to(&mut block[..want])?;
            buf.extend_from_slice(&block[..got]);
            if got < want {
                return Err(TraceError::Truncated {
                    offset: start,
                    context: "record body",
                });
            }
            left -= got;
        }
        self.offset = start + read + len;
        let record =
            TraceRecord::decode(Bytes::from(buf)).map_err(|source| TraceError::Decode {
                offset: start,
                source,
            })?;
        if RecordKind::try_from(record.kind).is_err() {
            return Err(TraceError::Invalid {
                offset: start,
                message: format!("unknown record kind {}", record.kind),
            });
        }
        Ok(Some((start, record)))
    }
}
