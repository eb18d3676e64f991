//! Protobuf base-128 varints: the one implementation the hand-written protobuf code (the
//! object decoders, the trace reader, the simulator's encoders) reads and writes them with.

/// Most bytes a varint of a `u64` takes.
pub(crate) const MAX_LEN: usize = 10;

/// Why [`read`] found no varint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VarintError {
    /// The input ends before the varint's last byte (more input may complete it).
    Truncated,
    /// Not a `u64`: ten bytes without an end, or a tenth byte with bits above bit 63.
    Overflow,
}

/// Reads the varint at the start of `b`: its value and the bytes it takes.
///
/// # Errors
/// [`VarintError::Truncated`] when `b` ends first; [`VarintError::Overflow`] when the varint
/// does not fit a `u64` (whatever follows: at most [`MAX_LEN`] bytes are looked at).
#[inline]
pub(crate) fn read(b: &[u8]) -> Result<(u64, usize), VarintError> {
    let mut value: u64 = 0;
    for (i, &byte) in b.iter().take(MAX_LEN).enumerate() {
        // The tenth byte holds bit 63 only (and must end the varint).
        if i == MAX_LEN - 1 && byte > 1 {
            return Err(VarintError::Overflow);
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Ok((value, i + 1));
        }
    }
    // Fewer than MAX_LEN bytes, all continuation bytes (a tenth would have returned above).
    Err(VarintError::Truncated)
}

/// Appends `v` as a varint.
#[inline]
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes the varint of `v` takes (1 to [`MAX_LEN`]).
#[inline]
pub(crate) fn len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_at_every_width() {
        for v in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX >> 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put(&mut out, v);
            assert_eq!(out.len(), len(v), "{v}");
            assert_eq!(read(&out), Ok((v, out.len())), "{v}");
            out.push(0x55);
            assert_eq!(
                read(&out),
                Ok((v, out.len() - 1)),
                "{v} with a byte after it"
            );
        }
        assert_eq!(len(u64::MAX), MAX_LEN);
    }

    #[test]
    fn truncated_and_overflow_differ() {
        assert_eq!(read(&[]), Err(VarintError::Truncated));
        assert_eq!(read(&[0x80]), Err(VarintError::Truncated));
        assert_eq!(read(&[0xff; 9]), Err(VarintError::Truncated));
        assert_eq!(read(&[0xff; 10]), Err(VarintError::Overflow));
        assert_eq!(read(&[0xff; 12]), Err(VarintError::Overflow));
        // A tenth byte of 2 would be bit 64.
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(read(&over), Err(VarintError::Overflow));
        over[9] = 0x01;
        assert_eq!(read(&over), Ok((u64::MAX, 10)));
    }
}
