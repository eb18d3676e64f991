//! List: pages from the simulator, re-encoded for the client, or filtered by namespace or
//! field selector and paged here.

use bytes::Bytes;
use serde_json::{Value, json};

use super::api::Api;
use super::filter::Filter;
use crate::object::{Encoding, Object, ObjectKey, decode_list, encode_list_protobuf};
use crate::reflector::{ApiError, ListOptions, ListerWatcher};
use crate::sim::ContinueToken;
use crate::sim::status::{bad_request, failure};

impl Api {
    /// A list page straight from the simulator, re-encoded when the client asked for the other
    /// encoding.
    pub(super) async fn list_page(
        &self,
        opts: &ListOptions,
        enc: Encoding,
        meta_only: bool,
    ) -> Result<Bytes, ApiError> {
        let body = self.sim.list(opts).await?;
        if enc == self.sim.encoding() && !meta_only {
            return Ok(body);
        }
        let list = decode_list(body)?;
        let items: Vec<&Object> = list.items.iter().collect();
        self.encode_list(
            enc,
            meta_only,
            &list.resource_version,
            &list.continue_token,
            list.remaining_item_count,
            &items,
        )
    }

    /// A list page restricted by namespace or field selector. The simulator lists everything
    /// at one resourceVersion (the first page) or exactly at the token's resourceVersion (later
    /// pages); this layer filters and pages with its own `continue` tokens, which carry no
    /// issue time.
    pub(super) async fn filtered_list_page(
        &self,
        opts: &ListOptions,
        filter: &Filter,
        enc: Encoding,
        meta_only: bool,
    ) -> Result<Bytes, ApiError> {
        let (full, after) = match opts.continue_token.as_deref() {
            Some(token) => {
                // A token with an issue time is the simulator's (an unfiltered list's): not
                // ours.
                let Some(ContinueToken {
                    rv,
                    issued_ms: None,
                    last,
                }) = ContinueToken::parse(token)
                else {
                    return Err(ApiError::Status(bad_request(format!(
                        "invalid continue token {token:?}"
                    ))));
                };
                let full = ListOptions {
                    resource_version: Some(rv.to_string()),
                    resource_version_match: Some("Exact".into()),
                    label_selector: opts.label_selector.clone(),
                    ..Default::default()
                };
                (full, Some(last))
            }
            None => (
                ListOptions {
                    limit: None,
                    continue_token: None,
                    ..opts.clone()
                },
                None,
            ),
        };
        let body = match self.sim.list(&full).await {
            Err(ApiError::Status(s)) if after.is_some() && s.code == 410 => {
                return Err(ApiError::Status(failure(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
                )));
            }
            r => r?,
        };
        let list = decode_list(body)?;
        let mut items: Vec<&Object> = list
            .items
            .iter()
            .filter(|o| filter.matches(o))
            .filter(|o| after.as_ref().is_none_or(|a| o.key().as_str() > a.as_str()))
            .collect();
        items.sort_by_key(|o| o.key());
        let limit = opts
            .limit
            .filter(|&l| l > 0)
            .map_or(usize::MAX, |l| l as usize);
        let (token, remaining) = if items.len() > limit {
            let remaining = (items.len() - limit) as i64;
            items.truncate(limit);
            let rv = list.resource_version.parse::<u64>().unwrap_or(0);
            let last = items
                .last()
                .map(|o| o.key())
                .unwrap_or_else(|| ObjectKey::from_raw(""));
            let token = ContinueToken {
                rv,
                issued_ms: None,
                last,
            };
            (token.encode(), Some(remaining))
        } else {
            (String::new(), None)
        };
        self.encode_list(
            enc,
            meta_only,
            &list.resource_version,
            &token,
            remaining,
            &items,
        )
    }

    /// A list document in `enc` (of `PartialObjectMetadata` when `meta_only`).
    pub(super) fn encode_list(
        &self,
        enc: Encoding,
        meta_only: bool,
        rv: &str,
        token: &str,
        remaining: Option<i64>,
        items: &[&Object],
    ) -> Result<Bytes, ApiError> {
        if meta_only {
            let partial = items
                .iter()
                .map(|o| o.to_partial_object_metadata(enc))
                .collect::<Result<Vec<Object>, _>>()?;
            let refs: Vec<&Object> = partial.iter().collect();
            let gvk = crate::object::partial_gvk(crate::object::PARTIAL_OBJECT_METADATA_LIST);
            return Ok(match enc {
                Encoding::Protobuf => encode_list_protobuf(&gvk, rv, token, remaining, &refs)?,
                Encoding::Json => {
                    crate::object::encode_list_json(&gvk, rv, token, remaining, &refs)?
                }
            });
        }
        match enc {
            Encoding::Protobuf => {
                if items.iter().any(|o| o.encoding() != Encoding::Protobuf) {
                    return Err(ApiError::Status(failure(
                        406,
                        "NotAcceptable",
                        "objects of this resource have no protobuf form".into(),
                    )));
                }
                Ok(encode_list_protobuf(
                    &self.list_gvk,
                    rv,
                    token,
                    remaining,
                    items,
                )?)
            }
            Encoding::Json => {
                let mut meta = json!({ "resourceVersion": rv });
                if !token.is_empty() {
                    meta["continue"] = token.into();
                }
                if let Some(n) = remaining {
                    meta["remainingItemCount"] = n.into();
                }
                let mut out =
                    Vec::with_capacity(items.iter().map(|o| o.raw_len() + 64).sum::<usize>() + 128);
                out.extend_from_slice(
                    format!(
                        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
                        Value::from(self.list_gvk.kind.as_str()),
                        Value::from(self.list_gvk.api_version()),
                        meta
                    )
                    .as_bytes(),
                );
                for (i, o) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&self.object_json(o)?);
                }
                out.extend_from_slice(b"]}");
                Ok(Bytes::from(out))
            }
        }
    }
}
