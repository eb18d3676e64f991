//! Fault injection: one-shot misbehaviours armed with [`super::SimServer::inject`].
//!
//! Standing misbehaviours (every watch closing after N events, a lagging list cache, expiring
//! `continue` tokens, bookmarks, no watch-list support) are [`super::SimConfig`] fields. A
//! [`Fault`] is the one-shot kind: it waits in a queue until the request or stream it applies to
//! comes, fires once, and is counted in [`super::SimStats`]. Faults parse from and print to a
//! short text form (`list:429:3`, `stream:close@10`, …; see [`Fault`]'s `FromStr`), so a command
//! line, an HTTP control endpoint or a flood driver firing them at a rate all speak the same
//! language.

use std::fmt;
use std::str::FromStr;

use crate::object::ApiStatus;
use crate::reflector::{ApiError, ListOptions, WatchOptions};

use super::status;

/// How a failed request is answered ([`Fault::List`], [`Fault::Watch`]). The `Status`es are
/// worded as upstream words them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorAnswer {
    /// 410 Expired (`too old resource version`). Text form `410`.
    Expired,
    /// 429 TooManyRequests with `retryAfterSeconds` (what API Priority and Fairness answers).
    /// Text form `429` (1 s) or `429:SECS`.
    TooManyRequests {
        /// `details.retryAfterSeconds`.
        retry_after_seconds: u32,
    },
    /// 500 InternalError. Text form `500`.
    InternalError,
    /// 504 Timeout with the `ResourceVersionTooLarge` cause (servers since 1.18.6). Text form
    /// `too-large`.
    TooLarge,
    /// 504 Timeout whose message says `Too large resource version`, without the cause (servers
    /// 1.17.0–1.18.5). Text form `too-large-legacy`.
    TooLargeLegacy,
    /// The connection is refused (the server is down). Text form `refused`.
    ConnectionRefused,
}

impl ErrorAnswer {
    /// The error a client sees, for a request at `requested` on a server at `current`
    /// (`too_large_retry_after`: see [`super::SimConfig::too_large_retry_after`]).
    pub(crate) fn to_error(
        self,
        requested: u64,
        current: u64,
        oldest: u64,
        too_large_retry_after: u32,
    ) -> ApiError {
        match self {
            ErrorAnswer::Expired => ApiError::Status(status::too_old(requested, oldest)),
            ErrorAnswer::TooManyRequests {
                retry_after_seconds,
            } => ApiError::Status(status::too_many_requests(retry_after_seconds)),
            ErrorAnswer::InternalError => ApiError::Status(status::internal_error()),
            ErrorAnswer::TooLarge => ApiError::Status(status::too_large(
                requested.max(current + 1),
                current,
                too_large_retry_after,
            )),
            ErrorAnswer::TooLargeLegacy => ApiError::Status(status::too_large_legacy(
                requested.max(current + 1),
                current,
                too_large_retry_after,
            )),
            ErrorAnswer::ConnectionRefused => ApiError::connection_refused(
                "dial tcp 127.0.0.1:6443: connect: connection refused (simulated)",
            ),
        }
    }

    /// The `Status` of this answer, `None` for [`ErrorAnswer::ConnectionRefused`] (too-large
    /// answers with the default `retryAfterSeconds: 1`).
    pub fn status(self, requested: u64, current: u64, oldest: u64) -> Option<ApiStatus> {
        match self.to_error(requested, current, oldest, 1) {
            ApiError::Status(s) => Some(s),
            _ => None,
        }
    }
}

/// What a watch stream does when a [`Fault::Stream`] fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamFault {
    /// Ends cleanly (as at its timeout). Text form `close`.
    Close,
    /// Sends an ERROR event with 410 Expired, then ends. Text form `410`.
    Expired,
    /// Sends a frame whose bytes are not a watch event (protobuf: a correct length prefix over
    /// undecodable bytes; JSON: a line that is not JSON), then ends. Text form `corrupt`.
    Corrupt,
    /// Sends a valid BOOKMARK event padded to `bytes` bytes (protobuf: an unknown field; JSON:
    /// whitespace), streamed in chunks without building it in memory, then goes on. A client
    /// whose frame limit is below `bytes` must drop the stream. Text form `oversized` (16 MiB +
    /// 1) or `oversized=BYTES`.
    Oversized {
        /// Size of the event as frame limits measure it: the protobuf message after its
        /// 4-byte length prefix, or the JSON line without its `\n`. At least the size of the
        /// plain bookmark.
        bytes: usize,
    },
    /// Stops sending and never ends, not even at its timeout: a stalled connection that only
    /// the client's own deadline breaks. Text form `stall`.
    Stall,
    /// Breaks with a transport error (connection reset by peer). Text form `reset`.
    Reset,
}

/// The frame limit of upstream clients (16 MiB), plus one: the default size of
/// [`StreamFault::Oversized`].
pub const OVERSIZED_DEFAULT: usize = 16 * 1024 * 1024 + 1;

/// A one-shot misbehaviour of the simulated server, armed with [`super::SimServer::inject`].
/// Faults of each kind wait in their own first-in first-out queue.
///
/// Text form (`FromStr`/`Display`): `list:ANSWER`, `watch:ANSWER`, `stream:ACTION[@N]` with
/// ANSWER one of `410`, `429[:SECS]`, `500`, `too-large`, `too-large-legacy`, `refused` and
/// ACTION one of `close`, `410`, `corrupt`, `oversized[=BYTES]`, `stall`, `reset`; `@N` delays a
/// stream fault by N events (default 0).
///
/// # Examples
/// ```
/// use informer::sim::{ErrorAnswer, Fault, StreamFault};
/// let f: Fault = "watch:429:3".parse().unwrap();
/// assert_eq!(f, Fault::Watch(ErrorAnswer::TooManyRequests { retry_after_seconds: 3 }));
/// let f: Fault = "stream:close@10".parse().unwrap();
/// assert_eq!(f, Fault::Stream { after_events: 10, action: StreamFault::Close });
/// assert_eq!(f.to_string(), "stream:close@10");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The next list request (any page) is answered with this error instead of a page.
    ///
    /// Only a list a real server could answer that way takes it (the fault waits for one):
    /// 410 Expired and the too-large answers need a list at a `resourceVersion` N > 0 (410
    /// also a `continue` token); a list of the current state (`""`, `"0"`) never gets them.
    /// (A real server expires a list at N only when it reads it from etcd at exactly N:
    /// `resourceVersionMatch=Exact`, or a `limit` without a watch cache; the fault does not
    /// ask which, so that a client's 410 handling can be tested against either kind of
    /// server.) 429, 500 and a refused connection can answer any list.
    List(ErrorAnswer),
    /// The next watch request is answered with this error instead of a stream. As for
    /// lists, 410 and the too-large answers wait for a watch from a resourceVersion N > 0.
    Watch(ErrorAnswer),
    /// The next watch stream to send anything (an open one, or the next one opened) does
    /// `action` after `after_events` more ADDED/MODIFIED/DELETED events (bookmarks are not
    /// counted). A stream takes one stream fault at a time.
    Stream {
        /// Events the stream still sends normally first.
        after_events: u64,
        /// What it then does.
        action: StreamFault,
    },
}

impl Fault {
    /// One fault of every kind, with small parameters: what a stress run fires to cover every
    /// switch.
    pub fn catalogue() -> Vec<Fault> {
        let answers = [
            ErrorAnswer::Expired,
            ErrorAnswer::TooManyRequests {
                retry_after_seconds: 1,
            },
            ErrorAnswer::InternalError,
            ErrorAnswer::TooLarge,
            ErrorAnswer::TooLargeLegacy,
            ErrorAnswer::ConnectionRefused,
        ];
        let actions = [
            StreamFault::Close,
            StreamFault::Expired,
            StreamFault::Corrupt,
            StreamFault::Oversized {
                bytes: OVERSIZED_DEFAULT,
            },
            StreamFault::Stall,
            StreamFault::Reset,
        ];
        answers
            .iter()
            .map(|&a| Fault::List(a))
            .chain(answers.iter().map(|&a| Fault::Watch(a)))
            .chain(actions.iter().map(|&action| Fault::Stream {
                after_events: 0,
                action,
            }))
            .collect()
    }
}

impl fmt::Display for ErrorAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorAnswer::Expired => f.write_str("410"),
            ErrorAnswer::TooManyRequests {
                retry_after_seconds,
            } => write!(f, "429:{retry_after_seconds}"),
            ErrorAnswer::InternalError => f.write_str("500"),
            ErrorAnswer::TooLarge => f.write_str("too-large"),
            ErrorAnswer::TooLargeLegacy => f.write_str("too-large-legacy"),
            ErrorAnswer::ConnectionRefused => f.write_str("refused"),
        }
    }
}

impl fmt::Display for StreamFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamFault::Close => f.write_str("close"),
            StreamFault::Expired => f.write_str("410"),
            StreamFault::Corrupt => f.write_str("corrupt"),
            StreamFault::Oversized { bytes } => write!(f, "oversized={bytes}"),
            StreamFault::Stall => f.write_str("stall"),
            StreamFault::Reset => f.write_str("reset"),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::List(a) => write!(f, "list:{a}"),
            Fault::Watch(a) => write!(f, "watch:{a}"),
            Fault::Stream {
                after_events: 0,
                action,
            } => write!(f, "stream:{action}"),
            Fault::Stream {
                after_events,
                action,
            } => write!(f, "stream:{action}@{after_events}"),
        }
    }
}

/// A fault's text form did not parse; the message says what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid fault {input:?}: {reason}")]
pub struct ParseFaultError {
    /// The text given.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl FromStr for ErrorAnswer {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "410" => ErrorAnswer::Expired,
            "429" => ErrorAnswer::TooManyRequests {
                retry_after_seconds: 1,
            },
            "500" => ErrorAnswer::InternalError,
            "too-large" => ErrorAnswer::TooLarge,
            "too-large-legacy" => ErrorAnswer::TooLargeLegacy,
            "refused" => ErrorAnswer::ConnectionRefused,
            _ => match s.strip_prefix("429:").map(str::parse) {
                Some(Ok(secs)) => ErrorAnswer::TooManyRequests {
                    retry_after_seconds: secs,
                },
                _ => {
                    return Err(
                        "expected an answer: 410, 429[:SECS], 500, too-large, too-large-legacy or refused",
                    );
                }
            },
        })
    }
}

impl FromStr for StreamFault {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "close" => StreamFault::Close,
            "410" => StreamFault::Expired,
            "corrupt" => StreamFault::Corrupt,
            "oversized" => StreamFault::Oversized {
                bytes: OVERSIZED_DEFAULT,
            },
            "stall" => StreamFault::Stall,
            "reset" => StreamFault::Reset,
            _ => match s.strip_prefix("oversized=").map(str::parse) {
                Some(Ok(bytes)) => StreamFault::Oversized { bytes },
                _ => {
                    return Err(
                        "expected a stream action: close, 410, corrupt, oversized[=BYTES], stall or reset",
                    );
                }
            },
        })
    }
}

impl FromStr for Fault {
    type Err = ParseFaultError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| ParseFaultError {
            input: s.to_owned(),
            reason,
        };
        let (target, rest) = s
            .split_once(':')
            .ok_or_else(|| err("expected list:ANSWER, watch:ANSWER or stream:ACTION[@N]"))?;
        match target {
            "list" => rest.parse().map(Fault::List).map_err(err),
            "watch" => rest.parse().map(Fault::Watch).map_err(err),
            "stream" => {
                let (action, after) = match rest.split_once('@') {
                    Some((a, n)) => (
                        a,
                        n.parse().map_err(|_| err("@N needs a number of events"))?,
                    ),
                    None => (rest, 0),
                };
                Ok(Fault::Stream {
                    after_events: after,
                    action: action.parse().map_err(err)?,
                })
            }
            _ => Err(err("expected list:, watch: or stream:")),
        }
    }
}

/// Faults waiting to fire, by kind, and how many fired.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    list: std::collections::VecDeque<ErrorAnswer>,
    watch: std::collections::VecDeque<ErrorAnswer>,
    stream: std::collections::VecDeque<(u64, StreamFault)>,
    /// Faults that fired.
    pub(crate) fired: u64,
}

impl Faults {
    pub(crate) fn push(&mut self, fault: Fault) {
        match fault {
            Fault::List(a) => self.list.push_back(a),
            Fault::Watch(a) => self.watch.push_back(a),
            Fault::Stream {
                after_events,
                action,
            } => self.stream.push_back((after_events, action)),
        }
    }

    /// Faults still waiting.
    pub(crate) fn pending(&self) -> usize {
        self.list.len() + self.watch.len() + self.stream.len()
    }

    /// The first waiting list fault that `opts` can be answered with (see [`Fault::List`]).
    pub(crate) fn take_list(&mut self, opts: &ListOptions) -> Option<ErrorAnswer> {
        let rv = positive_rv(opts.resource_version.as_deref().unwrap_or(""));
        let continued = opts
            .continue_token
            .as_deref()
            .is_some_and(|t| !t.is_empty());
        let applies = |a: &ErrorAnswer| match a {
            ErrorAnswer::Expired => rv || continued,
            ErrorAnswer::TooLarge | ErrorAnswer::TooLargeLegacy => rv && !continued,
            _ => true,
        };
        let a = take_first(&mut self.list, applies);
        self.fired += u64::from(a.is_some());
        a
    }

    /// The first waiting watch fault that `opts` can be answered with (see [`Fault::Watch`]).
    pub(crate) fn take_watch(&mut self, opts: &WatchOptions) -> Option<ErrorAnswer> {
        let rv = positive_rv(&opts.resource_version);
        let applies = |a: &ErrorAnswer| match a {
            ErrorAnswer::Expired | ErrorAnswer::TooLarge | ErrorAnswer::TooLargeLegacy => rv,
            _ => true,
        };
        let a = take_first(&mut self.watch, applies);
        self.fired += u64::from(a.is_some());
        a
    }

    /// A stream fault for a watch to arm (counted as fired when the watch fires it).
    pub(crate) fn take_stream(&mut self) -> Option<(u64, StreamFault)> {
        self.stream.pop_front()
    }
}

/// Whether `rv` names a resourceVersion (not `""` or `"0"`).
fn positive_rv(rv: &str) -> bool {
    rv.parse::<u64>().is_ok_and(|n| n > 0)
}

/// Removes and returns the first answer of `queue` that `applies`.
fn take_first(
    queue: &mut std::collections::VecDeque<ErrorAnswer>,
    applies: impl Fn(&ErrorAnswer) -> bool,
) -> Option<ErrorAnswer> {
    let i = queue.iter().position(applies)?;
    queue.remove(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalogued_fault_round_trips_through_text() {
        for f in Fault::catalogue() {
            let text = f.to_string();
            assert_eq!(text.parse::<Fault>(), Ok(f), "{text}");
        }
        let delayed = Fault::Stream {
            after_events: 7,
            action: StreamFault::Oversized { bytes: 100 },
        };
        assert_eq!(delayed.to_string(), "stream:oversized=100@7");
        assert_eq!("stream:oversized=100@7".parse(), Ok(delayed));
    }

    #[test]
    fn too_large_answers_carry_the_configured_retry_after() {
        for answer in [ErrorAnswer::TooLarge, ErrorAnswer::TooLargeLegacy] {
            let retry = |secs| match answer.to_error(9, 5, 1, secs) {
                ApiError::Status(s) => (s.code, s.retry_after_seconds),
                other => panic!("{other:?}"),
            };
            assert_eq!(retry(1), (504, Some(1)), "{answer}");
            assert_eq!(retry(3), (504, Some(3)), "{answer}");
            assert_eq!(retry(0), (504, None), "{answer}");
            assert_eq!(
                answer.status(9, 5, 1).map(|s| s.retry_after_seconds),
                Some(Some(1))
            );
        }
    }

    #[test]
    fn expired_and_too_large_wait_for_a_request_a_real_server_could_answer_so() {
        let mut f = Faults::default();
        f.push(Fault::List(ErrorAnswer::Expired));
        f.push(Fault::List(ErrorAnswer::TooLarge));
        f.push(Fault::List(ErrorAnswer::InternalError));
        let list = |rv: &str, m: Option<&str>, limit: Option<u32>| ListOptions {
            resource_version: Some(rv.to_owned()),
            resource_version_match: m.map(str::to_owned),
            limit,
            ..Default::default()
        };
        // A list from the current state can only get the 500.
        assert_eq!(
            f.take_list(&list("", None, Some(500))),
            Some(ErrorAnswer::InternalError)
        );
        assert_eq!(f.take_list(&list("0", None, Some(500))), None);
        assert_eq!(
            f.take_list(&list("7", None, None)),
            Some(ErrorAnswer::Expired)
        );
        assert_eq!(
            f.take_list(&list("7", Some("Exact"), None)),
            Some(ErrorAnswer::TooLarge)
        );
        assert_eq!(f.take_list(&list("7", None, None)), None);
        f.push(Fault::List(ErrorAnswer::Expired));
        let continued = ListOptions {
            continue_token: Some("t".into()),
            ..Default::default()
        };
        assert_eq!(f.take_list(&continued), Some(ErrorAnswer::Expired));
        f.push(Fault::Watch(ErrorAnswer::Expired));
        f.push(Fault::Watch(ErrorAnswer::TooManyRequests {
            retry_after_seconds: 1,
        }));
        let watch = |rv: &str| WatchOptions {
            resource_version: rv.to_owned(),
            ..Default::default()
        };
        assert!(matches!(
            f.take_watch(&watch("0")),
            Some(ErrorAnswer::TooManyRequests { .. })
        ));
        assert_eq!(f.take_watch(&watch("")), None);
        assert_eq!(f.take_watch(&watch("9")), Some(ErrorAnswer::Expired));
        assert_eq!((f.pending(), f.fired), (0, 6));
    }

    #[test]
    fn bad_text_is_a_typed_error() {
        for bad in [
            "",
            "list",
            "list:",
            "list:418",
            "stream:close@x",
            "disk:full",
            "watch:429:x",
        ] {
            let e = bad.parse::<Fault>().unwrap_err();
            assert_eq!(e.input, bad);
        }
    }
}
