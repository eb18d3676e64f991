//! [`expected_state`]: the store contents a recorded stream implies, to verify a replay by.

use std::path::Path;

use super::error::TraceError;
use super::format::RecordKind;
use super::reader::TraceReader;
use super::record::parse_format;
use crate::object::{
    DEFAULT_FRAME_LIMIT, DecodeError, ObjectKey, WatchDecoder, WatchEvent, decode_list,
    parse_resource_version,
};

/// The state a recorded stream implies: what the store of a correct informer holds after
/// consuming it.
#[derive(Debug, Clone, Default)]
pub struct ExpectedState {
    /// The last resourceVersion the stream reached (list, event or bookmark).
    pub resource_version: u64,
    /// `key → (uid, resourceVersion)`.
    pub objects: std::collections::BTreeMap<ObjectKey, (String, String)>,
    /// Complete lists in the trace (first list and relists).
    pub lists: u64,
    /// ADDED/MODIFIED/DELETED events applied.
    pub events: u64,
    /// Watch streams whose bytes stopped decoding (corrupt or oversized frames): the rest of
    /// such a stream is ignored, as the reflector drops it.
    pub broken_streams: u64,
}

/// Reads the trace at `path` and computes the [`ExpectedState`] by the reflector's rules: a
/// complete (paginated) list replaces the state; watch events after it are applied in order;
/// an ERROR event, a frame that does not decode or exceeds `frame_limit` (use
/// [`DEFAULT_FRAME_LIMIT`] for the reflector's default) ends its stream's contribution.
///
/// # Errors
/// Any [`TraceError`] reading the file; [`TraceError::Invalid`] for a list page that does not
/// decode.
pub fn expected_state(
    path: impl AsRef<Path>,
    frame_limit: usize,
) -> Result<ExpectedState, TraceError> {
    let mut reader = TraceReader::open(path)?;
    let mut st = ExpectedState::default();
    let mut pending: Option<Vec<(ObjectKey, (String, String))>> = None;
    let mut stream: Option<(u64, WatchDecoder)> = None;
    while let Some((off, r)) = reader.next_record()? {
        match RecordKind::try_from(r.kind) {
            Ok(RecordKind::ListPage) => {
                let list = decode_list(r.body).map_err(|e: DecodeError| TraceError::Invalid {
                    offset: off,
                    message: format!("list page: {e}"),
                })?;
                let items = pending.get_or_insert_with(Vec::new);
                items.extend(list.items.iter().map(|o| {
                    (
                        o.key(),
                        (o.uid().to_owned(), o.resource_version().to_owned()),
                    )
                }));
                if list.continue_token.is_empty() {
                    st.objects = pending.take().unwrap_or_default().into_iter().collect();
                    st.resource_version =
                        parse_resource_version(&list.resource_version).unwrap_or(0);
                    st.lists += 1;
                }
            }
            Ok(RecordKind::ListError) => pending = None,
            Ok(RecordKind::WatchOpen) => {
                let format = parse_format(&r.format, off)?;
                stream = Some((r.stream, WatchDecoder::new(format, frame_limit)));
            }
            Ok(RecordKind::WatchChunk) => {
                let Some((id, dec)) = stream.as_mut() else {
                    continue;
                };
                if *id != r.stream {
                    continue;
                }
                dec.push(r.body);
                loop {
                    match dec.next_event() {
                        Ok(Some(ev)) => {
                            if !apply(&mut st, ev) {
                                stream = None;
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {
                            st.broken_streams += 1;
                            stream = None;
                            break;
                        }
                    }
                }
            }
            Ok(RecordKind::WatchEnd | RecordKind::WatchBroken)
                if stream.as_ref().is_some_and(|(id, _)| *id == r.stream) =>
            {
                stream = None;
            }
            _ => {}
        }
    }
    Ok(st)
}

/// Applies one watch event; `false` when the stream ends here (an ERROR event).
fn apply(st: &mut ExpectedState, ev: WatchEvent) -> bool {
    let rv_of = |o: &crate::object::Object| parse_resource_version(o.resource_version());
    match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
            if let Some(rv) = rv_of(&o) {
                st.resource_version = st.resource_version.max(rv);
            }
            st.events += 1;
            st.objects.insert(
                o.key(),
                (o.uid().to_owned(), o.resource_version().to_owned()),
            );
        }
        WatchEvent::Deleted(o) => {
            if let Some(rv) = rv_of(&o) {
                st.resource_version = st.resource_version.max(rv);
            }
            st.events += 1;
            st.objects.remove(&o.key());
        }
        WatchEvent::Bookmark(o) => {
            if let Some(rv) = rv_of(&o) {
                st.resource_version = st.resource_version.max(rv);
            }
        }
        WatchEvent::Error(_) => return false,
    }
    true
}

/// Shorthand for [`expected_state`] with the reflector's default frame limit.
///
/// # Errors
/// As [`expected_state`].
pub fn expected_state_default(path: impl AsRef<Path>) -> Result<ExpectedState, TraceError> {
    expected_state(path, DEFAULT_FRAME_LIMIT)
}
