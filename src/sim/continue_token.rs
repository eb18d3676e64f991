//! The `continue` token of paged lists, shared by the simulator's lists and the HTTP layer's
//! filtered lists: opaque to clients, URL-safe, and `None` when it is not one of ours.

use crate::object::ObjectKey;

/// Where the next page of a list starts.
///
/// Text form: `<rv>.<issued ms>.<hex of the last key>`, or `f.<rv>.<hex of the last key>`
/// without an issue time. Neither form parses as the other with a different meaning (`f` is
/// no number), so each list can refuse the other's tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ContinueToken {
    /// The resourceVersion of the snapshot being paged through.
    pub(crate) rv: u64,
    /// When the first page was served, in milliseconds since the simulator's epoch (checked
    /// against `SimConfig::continue_ttl`). `None` in the HTTP layer's filtered lists, whose
    /// later pages are exact lists at `rv` with no TTL of their own.
    pub(crate) issued_ms: Option<u64>,
    /// The last key served: the next page starts after it.
    pub(crate) last: ObjectKey,
}

impl ContinueToken {
    /// The token's text form.
    pub(crate) fn encode(&self) -> String {
        let mut s = match self.issued_ms {
            Some(issued) => format!("{}.{issued}.", self.rv),
            None => format!("f.{}.", self.rv),
        };
        for b in self.last.as_str().bytes() {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }

    /// Parses a token's text form; `None` for anything else.
    pub(crate) fn parse(token: &str) -> Option<Self> {
        let (rv, issued_ms, hex) = match token.strip_prefix("f.") {
            Some(rest) => {
                let (rv, hex) = rest.split_once('.')?;
                (rv, None, hex)
            }
            None => {
                let mut parts = token.splitn(3, '.');
                let rv = parts.next()?;
                let issued = parts.next()?.parse().ok()?;
                (rv, Some(issued), parts.next()?)
            }
        };
        Some(ContinueToken {
            rv: rv.parse().ok()?,
            issued_ms,
            last: ObjectKey::from_raw(&hex_decode(hex)?),
        })
    }
}

/// The text whose UTF-8 bytes `hex` spells, two hex digits per byte.
fn hex_decode(hex: &str) -> Option<String> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = hex
        .as_bytes()
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(issued_ms: Option<u64>, last: &str) -> ContinueToken {
        ContinueToken {
            rv: 42,
            issued_ms,
            last: ObjectKey::from_raw(last),
        }
    }

    #[test]
    fn round_trips_both_forms() {
        for t in [
            token(Some(1234), "ns-1/pod-é"),
            token(None, "ns-1/pod-é"),
            token(Some(0), ""),
            token(None, ""),
        ] {
            let s = t.encode();
            assert!(s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.'));
            assert_eq!(ContinueToken::parse(&s), Some(t));
        }
        assert_eq!(token(Some(7), "a/b").encode(), "42.7.612f62");
        assert_eq!(token(None, "a/b").encode(), "f.42.612f62");
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            ".",
            "..",
            "f.",
            "f..",
            "x.1.61",
            "1.x.61",
            "1.2.6",
            "1.2.zz",
            "1.2.ff",
            "1.2.61.62",
            "f.x.61",
            "f.1.6",
            "f.1.2.61",
            "f.1",
            "1.2",
            "-1.2.61",
            "1.2.é1",
        ] {
            assert_eq!(ContinueToken::parse(s), None, "{s:?}");
        }
    }
}
