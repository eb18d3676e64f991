//! Watch: a chunked response body, one frame or line per event (upstream
//! `apiserver/pkg/endpoints/handlers/watch.go` `serveWatch`).

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::Response;
use http::header::CONTENT_TYPE;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::watch;

use super::api::Api;
use super::filter::Filter;
use super::response::{JSON, PROTOBUF_WATCH, ResponseBody, api_error_response};
use super::stats::ServerStats;
use super::transcode::JsonTranscoder;
use crate::object::{
    DEFAULT_FRAME_LIMIT, DecodeError, Encoding, Object, ObjectKey, WatchDecoder, WatchEvent,
    encode_watch_frame,
};
use crate::reflector::{Body as _, ListerWatcher, WatchOptions};
use crate::sim::SimWatch;

impl Api {
    /// Opens a watch on the simulator and streams it to the client.
    pub(super) async fn watch(
        &self,
        opts: WatchOptions,
        filter: Filter,
        enc: Encoding,
        meta_only: bool,
    ) -> Response<ResponseBody> {
        let resp = match self.sim.watch(&opts).await {
            Ok(r) => r,
            Err(e) => return api_error_response(e, enc),
        };
        let pass = filter.is_empty() && enc == self.sim.encoding() && !meta_only;
        let mode = if pass {
            Mode::Pass
        } else {
            let selected = filter
                .tracks_membership()
                .then(|| self.selected_at(&opts, &filter));
            Mode::Transform(Box::new(Transform {
                decoder: WatchDecoder::new(resp.format, DEFAULT_FRAME_LIMIT).with_compaction(0),
                filter,
                selected,
                target: enc,
                json: self.json.clone(),
                meta_only,
            }))
        };
        self.stats.watches.fetch_add(1, Ordering::Relaxed);
        self.stats.watches_open.fetch_add(1, Ordering::Relaxed);
        let stream = WatchStream {
            watch: resp.body,
            hold: Some(self.hold.subscribe()),
            mode,
            stats: self.stats.clone(),
            done: false,
        };
        let body = futures_util::stream::unfold(stream, |mut s| async move {
            let item = s.next().await?;
            Some((item.map(Frame::data), s))
        })
        .boxed();
        let ct = match enc {
            Encoding::Protobuf => PROTOBUF_WATCH,
            Encoding::Json => JSON,
        };
        let mut r = Response::new(StreamBody::new(body).boxed_unsync());
        if let Ok(v) = ct.parse() {
            r.headers_mut().insert(CONTENT_TYPE, v);
        }
        r
    }
}

impl Api {
    /// The objects `filter` selects at the watch's start: the state at its resourceVersion,
    /// or none when the watch starts with the current state as ADDED events (`""`, `"0"`,
    /// `sendInitialEvents`), which fill the set as they pass.
    fn selected_at(&self, opts: &WatchOptions, filter: &Filter) -> HashMap<ObjectKey, Object> {
        let rv = match opts.resource_version.parse::<u64>() {
            Ok(rv) if rv > 0 && !opts.send_initial_events => rv,
            _ => return HashMap::new(),
        };
        self.sim
            .objects_at(rv)
            .unwrap_or_default()
            .into_iter()
            .filter(|o| filter.matches(o))
            .map(|o| (o.key(), Object::clone(&o)))
            .collect()
    }
}

/// What a watch filtered on labels or mutable fields sends for `ev`, as upstream's watch
/// cache does (`storage/cacher/cache_watcher.go` `convertToWatchEvent`): an object that
/// starts to match is ADDED, one that stops matching is DELETED (its last matching state,
/// at the change's resourceVersion), changes outside the selection are not sent.
fn select(
    filter: &Filter,
    selected: &mut HashMap<ObjectKey, Object>,
    ev: WatchEvent,
) -> Result<Option<WatchEvent>, DecodeError> {
    Ok(match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) if filter.matches(&o) => {
            match selected.insert(o.key(), o.clone()) {
                Some(_) => Some(WatchEvent::Modified(o)),
                None => Some(WatchEvent::Added(o)),
            }
        }
        WatchEvent::Added(o) | WatchEvent::Modified(o) => match selected.remove(o.key_ref()) {
            Some(last) => {
                let mut meta = last.meta().to_fields();
                meta.resource_version = o.meta().resource_version().into();
                Some(WatchEvent::Deleted(last.with_meta(meta.into())?))
            }
            None => None,
        },
        WatchEvent::Deleted(o) => selected.remove(o.key_ref()).map(|_| WatchEvent::Deleted(o)),
        other => Some(other),
    })
}

/// How a watch's chunks reach the client.
enum Mode {
    /// The simulator's chunks as they are (same encoding, nothing filtered): no decode, no
    /// copy in this layer.
    Pass,
    /// Decode, filter, and encode each event in the target encoding. A chunk that does not
    /// decode (a corrupt-frame fault) ends the response: nothing corrupt is re-encoded.
    Transform(Box<Transform>),
}

/// The state of a transformed watch.
struct Transform {
    decoder: WatchDecoder,
    filter: Filter,
    /// The objects the client has been told match, when objects can enter and leave the
    /// selection ([`Filter::tracks_membership`]); `None` when matching is fixed for life.
    selected: Option<HashMap<ObjectKey, Object>>,
    target: Encoding,
    json: Option<JsonTranscoder>,
    /// Send each object's `PartialObjectMetadata` (a metadata-only watch).
    meta_only: bool,
}

/// One watch response body.
struct WatchStream {
    watch: SimWatch,
    /// Until released, the stream sends nothing (see `ServerHandle::hold_watches`).
    hold: Option<watch::Receiver<bool>>,
    mode: Mode,
    stats: Arc<ServerStats>,
    done: bool,
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        self.stats.watches_open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl WatchStream {
    async fn next(&mut self) -> Option<Result<Bytes, io::Error>> {
        if self.done {
            return None;
        }
        if let Some(mut rx) = self.hold.take() {
            // An error means the server is gone: go on, the connection closes soon.
            let _ = rx.wait_for(|held| !held).await;
        }
        let r = self.next_inner().await;
        match &r {
            Some(Ok(b)) => {
                self.stats
                    .watch_bytes
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
            }
            Some(Err(_)) | None => self.done = true,
        }
        r
    }

    async fn next_inner(&mut self) -> Option<Result<Bytes, io::Error>> {
        loop {
            let chunk = match self.watch.next_chunk().await {
                Some(Ok(c)) => Some(c),
                Some(Err(e)) => {
                    // A body error makes hyper drop the connection at once, discarding what it
                    // has buffered: let the bytes already yielded reach the socket first, as
                    // they would have before a real connection reset.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    return Some(Err(io::Error::other(e)));
                }
                None => None,
            };
            let Mode::Transform(t) = &mut self.mode else {
                return chunk.map(Ok);
            };
            let Transform {
                decoder,
                filter,
                selected,
                target,
                json,
                meta_only,
            } = &mut **t;
            let mut events = Vec::new();
            match chunk {
                Some(c) => {
                    decoder.push(c);
                    loop {
                        match decoder.next_event() {
                            Ok(Some(ev)) => events.push(ev),
                            Ok(None) => break,
                            Err(e) => return Some(Err(io::Error::other(e))),
                        }
                    }
                }
                None => match decoder.finish() {
                    Ok(Some(ev)) => events.push(ev),
                    Ok(None) => return None,
                    Err(e) => return Some(Err(io::Error::other(e))),
                },
            }
            let mut out = Vec::new();
            for ev in events {
                let ev = match selected {
                    Some(selected) => match select(filter, selected, ev) {
                        Ok(Some(ev)) => ev,
                        Ok(None) => continue,
                        Err(e) => return Some(Err(io::Error::other(e))),
                    },
                    None => {
                        let keep = match &ev {
                            WatchEvent::Added(o)
                            | WatchEvent::Modified(o)
                            | WatchEvent::Deleted(o) => filter.matches(o),
                            WatchEvent::Bookmark(_) | WatchEvent::Error(_) => true,
                        };
                        if !keep {
                            continue;
                        }
                        ev
                    }
                };
                let ev = &ev;
                if *meta_only {
                    let partial = |o: &Object| o.to_partial_object_metadata(*target);
                    let ev = match ev {
                        WatchEvent::Added(o) => partial(o).map(WatchEvent::Added),
                        WatchEvent::Modified(o) => partial(o).map(WatchEvent::Modified),
                        WatchEvent::Deleted(o) => partial(o).map(WatchEvent::Deleted),
                        other => Ok(other.clone()),
                    };
                    let r = ev.map_err(io::Error::other).and_then(|ev| match *target {
                        Encoding::Protobuf => {
                            encode_watch_frame(&ev, &mut out).map_err(io::Error::other)
                        }
                        Encoding::Json => crate::object::encode_watch_line(&ev, &mut out)
                            .map_err(io::Error::other),
                    });
                    if let Err(e) = r {
                        return Some(Err(e));
                    }
                    continue;
                }
                let r = match (*target, json.as_ref()) {
                    (Encoding::Protobuf, _) => {
                        encode_watch_frame(ev, &mut out).map_err(io::Error::other)
                    }
                    (Encoding::Json, Some(t)) => {
                        t.watch_line(ev, &mut out).map_err(io::Error::other)
                    }
                    (Encoding::Json, None) => {
                        crate::object::encode_watch_line(ev, &mut out).map_err(io::Error::other)
                    }
                };
                if let Err(e) = r {
                    return Some(Err(e));
                }
            }
            if !out.is_empty() {
                return Some(Ok(Bytes::from(out)));
            }
        }
    }
}
