//! [`RawFrames`]: counts the protobuf watch frames of a chunked HTTP/1.1 response as its bytes
//! arrive, skipping payloads by their length prefix without copying them: the "raw drain"
//! baseline of the end-to-end and peer benches (the physical limit of server, socket and
//! machine).

/// Counts protobuf watch frames in a chunked HTTP/1.1 response without copying payload.
#[derive(Default)]
pub(crate) struct RawFrames {
    head_done: bool,
    head: Vec<u8>,
    /// Bytes left in the current HTTP chunk.
    chunk_left: usize,
    /// Pending chunk-size line.
    line: Vec<u8>,
    /// Bytes of the current frame still to skip, or of its 4-byte prefix gathered.
    frame_left: usize,
    prefix: Vec<u8>,
    pub(crate) frames: u64,
    /// Skip the CRLF after a chunk's data.
    crlf: usize,
}

impl RawFrames {
    pub(crate) fn feed(&mut self, mut data: &[u8]) {
        if !self.head_done {
            self.head.extend_from_slice(data);
            let Some(i) = self.head.windows(4).position(|w| w == b"\r\n\r\n") else {
                return;
            };
            self.head_done = true;
            let rest = self.head.split_off(i + 4);
            self.feed_body(&rest);
            return;
        }
        while !data.is_empty() {
            data = self.step(data);
        }
    }

    fn feed_body(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            data = self.step(data);
        }
    }

    fn step<'a>(&mut self, data: &'a [u8]) -> &'a [u8] {
        if self.crlf > 0 {
            let n = self.crlf.min(data.len());
            self.crlf -= n;
            return &data[n..];
        }
        if self.chunk_left == 0 {
            // A chunk-size line.
            match data.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.line.extend_from_slice(&data[..i]);
                    let text = std::str::from_utf8(&self.line).unwrap().trim();
                    let size = usize::from_str_radix(text.split(';').next().unwrap(), 16).unwrap();
                    self.line.clear();
                    self.chunk_left = size;
                    if size == 0 {
                        panic!("stream ended");
                    }
                    &data[i + 1..]
                }
                None => {
                    self.line.extend_from_slice(data);
                    &[]
                }
            }
        } else {
            let n = self.chunk_left.min(data.len());
            self.frames_in(&data[..n]);
            self.chunk_left -= n;
            if self.chunk_left == 0 {
                self.crlf = 2;
            }
            &data[n..]
        }
    }

    /// Counts the frames in `data`, bytes of an already de-chunked body.
    pub(crate) fn frames_in(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.frame_left > 0 {
                let n = self.frame_left.min(data.len());
                self.frame_left -= n;
                data = &data[n..];
                if self.frame_left == 0 {
                    self.frames += 1;
                }
                continue;
            }
            let need = 4 - self.prefix.len();
            let n = need.min(data.len());
            self.prefix.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.prefix.len() == 4 {
                self.frame_left = u32::from_be_bytes(self.prefix[..4].try_into().unwrap()) as usize;
                self.prefix.clear();
                if self.frame_left == 0 {
                    self.frames += 1;
                }
            }
        }
    }
}
