//! The simulator's list endpoint: one page of a consistent snapshot, chosen by
//! `resourceVersion`, `resourceVersionMatch` and `continue` as a real API server chooses it
//! (`apiserver/pkg/storage/cacher/cacher.go` `GetList`, `storage/etcd3/store.go` `GetList`).

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::continue_token::ContinueToken;
use super::shared::Shared;
use super::state::Item;
use super::status;
use crate::object::{
    Encoding, Object, encode_list_json, encode_list_protobuf, parse_resource_version,
};
use crate::reflector::{ApiError, ListOptions};

/// Serves one list page (see [`crate::reflector::ListerWatcher::list`]) and the
/// resourceVersion it is at.
pub(super) fn list_page(shared: &Shared, opts: &ListOptions) -> Result<(Bytes, u64), ApiError> {
    let cfg = &shared.cfg;
    if let Some(s) = status::reject_selectors(
        opts.label_selector.as_deref(),
        opts.field_selector.as_deref(),
    ) {
        return Err(ApiError::Status(s));
    }
    let limit = opts
        .limit
        .filter(|&l| l > 0)
        .map(|l| cfg.max_page_size.map_or(l, |m| l.min(m)) as usize);
    let rv_param = opts.resource_version.as_deref().unwrap_or("");
    let now = Instant::now();

    // Which snapshot, from which key on, and when its first page was served.
    let (rv, items, after, issued_ms) =
        if let Some(token) = opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
            if !rv_param.is_empty() && rv_param != "0" {
                return Err(ApiError::Status(status::bad_request(
                    "specifying resource version is not allowed when using continue",
                )));
            }
            let invalid = || {
                ApiError::Status(status::bad_request(format!(
                    "invalid continue token {token:?}"
                )))
            };
            // A token without an issue time is a filtered list's (the HTTP layer's): not ours.
            let Some(ContinueToken {
                rv,
                issued_ms: Some(issued_ms),
                last,
            }) = ContinueToken::parse(token)
            else {
                return Err(invalid());
            };
            if let Some(ttl) = cfg.continue_ttl {
                let issued = shared.epoch + Duration::from_millis(issued_ms);
                if now.saturating_duration_since(issued) > ttl {
                    return Err(ApiError::Status(status::continue_expired()));
                }
            }
            let mut st = shared.lock();
            if rv > st.rv {
                return Err(invalid());
            }
            let items = st
                .items_at(cfg, rv)
                .ok_or_else(|| ApiError::Status(status::continue_expired()))?;
            (rv, items, Some(last), issued_ms)
        } else {
            let issued_ms = now.saturating_duration_since(shared.epoch).as_millis() as u64;
            let exact = opts.resource_version_match.as_deref() == Some("Exact");
            let requested = match rv_param {
                "" | "0" if !exact => None,
                s => Some(
                    parse_resource_version(s)
                        .filter(|&v| v > 0)
                        .ok_or_else(|| {
                            ApiError::Status(status::bad_request(format!(
                                "invalid resource version {s:?}"
                            )))
                        })?,
                ),
            };
            let mut st = shared.lock();
            match requested {
                Some(r) if r > st.rv => {
                    return Err(ApiError::Status(status::too_large(
                        r,
                        st.rv,
                        cfg.too_large_retry_after,
                    )));
                }
                Some(r) if exact => {
                    let items = st
                        .items_at(cfg, r)
                        .ok_or_else(|| ApiError::Status(status::too_old(r, st.compacted + 1)))?;
                    (r, items, None, issued_ms)
                }
                _ if cfg.list_lag > 0 && !rv_param.is_empty() => {
                    // A lagging cache serves "0" and "N" from its older state, even when
                    // that is older than N (the fault); "" is a quorum read.
                    let rv = st.rv.saturating_sub(cfg.list_lag).max(st.compacted);
                    if cfg.flow_control {
                        st.hold(rv, now + cfg.linger);
                    }
                    let items = st
                        .items_at(cfg, rv)
                        .ok_or_else(|| ApiError::Status(status::too_old(rv, st.compacted + 1)))?;
                    (rv, items, None, issued_ms)
                }
                _ => {
                    let rv = st.rv;
                    if cfg.flow_control {
                        st.hold(rv, now + cfg.linger);
                    }
                    let items = st.current_items();
                    if limit.is_some_and(|l| st.objects.len() > l) {
                        // Kept for the later pages (`items_at` finds it).
                        st.cache_snapshot(cfg, rv, items.clone());
                    }
                    (rv, items, None, issued_ms)
                }
            }
        };

    // The page.
    let start = match &after {
        Some(k) => items.partition_point(|(key, _)| key.as_str() <= k.as_str()),
        None => 0,
    };
    let end = limit.map_or(items.len(), |l| (start + l).min(items.len()));
    let objects = items[start..end]
        .iter()
        .map(|(_, r)| r.object())
        .collect::<Result<Vec<_>, _>>()?;
    let page: Vec<&Object> = objects.iter().map(|o| &**o).collect();
    let remaining = items.len() - end;
    let (token, remaining) = if remaining > 0 {
        // Later pages keep the first page's issue time.
        let last: &Item = &items[end - 1];
        let token = ContinueToken {
            rv,
            issued_ms: Some(issued_ms),
            last: last.0.clone(),
        };
        (token.encode(), Some(remaining as i64))
    } else {
        (String::new(), None)
    };
    let rv_s = rv.to_string();
    let body = match cfg.templates.encoding() {
        Encoding::Protobuf => {
            encode_list_protobuf(&shared.list_gvk, &rv_s, &token, remaining, &page)?
        }
        Encoding::Json => encode_list_json(&shared.list_gvk, &rv_s, &token, remaining, &page)?,
    };
    Ok((body, rv))
}
