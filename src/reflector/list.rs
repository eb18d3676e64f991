//! The list phase (client-go `Reflector.list` over `tools/pager/pager.go`): every page of a
//! list, the fallback when a continue token expires, and what a failed or stale list leads to.

use std::sync::Arc;

use super::list_buffer::ListBuffer;
use crate::object::{ListStream, Object, ObjectList};

/// Objects of a list handed to the store's `listed` at a time, as they are decoded: enough to
/// pay its per-call work (a store snapshot, the compactor's lock) rarely, few enough that the
/// received chunks they hold stay small (256 etcd Pods: about 400 KB).
const LISTED_BATCH: usize = 256;

use super::error::{ReflectorError, StoreClosed, is_version_unavailable, retry_after};
use super::lister_watcher::{ApiError, Body, ListOptions, ListerWatcher};
use super::machine::{Reflector, State};
use super::metrics::ReflectorMetrics;

impl<L: ListerWatcher> Reflector<L> {
    /// Options of the first page (client-go `list`): paginated for `"0"` and `""`; a relist at
    /// a specific resourceVersion is not paginated, so the API server can serve it from its
    /// watch cache instead of etcd, unless the first list showed there is no watch cache.
    fn list_options(&self, rv: &str) -> ListOptions {
        let specific = !rv.is_empty() && rv != "0";
        let paginate = self.config.page_size > 0 && (!specific || self.paginated_result);
        ListOptions {
            resource_version: Some(rv.to_owned()),
            resource_version_match: None,
            limit: paginate.then_some(self.config.page_size),
            continue_token: None,
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
        }
    }

    /// Fetches every page (client-go `pager.List`); on an expired continue token, one
    /// unpaginated list at the same resourceVersion. Returns the items, the list's
    /// resourceVersion and whether it came in more than one page.
    async fn list_all(&self, rv: &str) -> Result<(Vec<Arc<Object>>, String, bool), ApiError> {
        let mut opts = self.list_options(rv);
        let mut items = Vec::new();
        let mut pages = 0u32;
        self.store.list_begins(true);
        loop {
            let list = match self.list_page(rv, &opts, &mut items).await {
                Ok(l) => l,
                Err(ApiError::Status(s)) if pages > 0 && s.reason == "Expired" => {
                    // The continue token expired: fall back to one full list (pager.go).
                    let full = ListOptions {
                        limit: None,
                        continue_token: None,
                        ..self.list_options(rv)
                    };
                    items.clear();
                    self.store.list_begins(true);
                    let list = self.list_page(rv, &full, &mut items).await?;
                    return Ok((items, list.resource_version, true));
                }
                Err(e) => return Err(e),
            };
            if pages == 0 {
                // `remainingItemCount` is the server's word, not a length we allocate from
                // unchecked: capped.
                items.reserve(list.remaining_item_count.unwrap_or(0).clamp(0, 1 << 16) as usize);
            }
            pages += 1;
            if list.continue_token.is_empty() {
                return Ok((items, list.resource_version, pages > 1));
            }
            opts.continue_token = Some(list.continue_token);
            // Later pages are served at the first page's version, named by the token.
            opts.resource_version = None;
            opts.resource_version_match = None;
        }
    }

    /// Fetches one page and decodes it as its body arrives ([`ListStream`], a megabyte at a
    /// time: see [`ListBuffer`]), handing its objects to
    /// [`ReflectorStore::listed`](super::ReflectorStore::listed) in batches of
    /// [`LISTED_BATCH`] and appending what that returns to `items`: a page (an unpaginated
    /// list is one page of everything) is never held whole, received or decoded. Returns the
    /// page's metadata.
    ///
    /// A page served at a version older than `requested` or than the last one delivered (see
    /// [`goes_back`](Reflector::goes_back)) passes nothing on: the store may queue listed
    /// objects at once (see [`ReflectorStore::list_begins`](super::ReflectorStore::list_begins)),
    /// so the version is checked as soon as the body names it, and such a page returns its
    /// metadata alone (no continue token) for the caller to refuse.
    async fn list_page(
        &self,
        requested: &str,
        opts: &ListOptions,
        items: &mut Vec<Arc<Object>>,
    ) -> Result<ObjectList, ApiError> {
        let mut body = self.lw.list_chunks(opts).await?;
        ReflectorMetrics::inc(&self.metrics.list_pages);
        let mut stream = ListStream::new(self.config.frame_limit);
        let mut batch: Vec<Arc<Object>> = Vec::new();
        // Objects passed on before the page's version was known: in the store's form, not
        // taken by it; with every later object of the page, to keep the list's order.
        let mut unchecked: Vec<Arc<Object>> = Vec::new();
        let mut checked = false;
        let mut gathered = ListBuffer::default();
        let mut ended = false;
        while !ended {
            let chunk = match body.next_chunk().await {
                Some(chunk) => gathered.add(chunk?),
                None => {
                    ended = true;
                    gathered.take()
                }
            };
            let Some(chunk) = chunk else {
                continue;
            };
            batch.extend(stream.feed(chunk)?.into_iter().map(Arc::new));
            if !checked && let Some(served) = stream.resource_version() {
                if self.goes_back(requested, served) {
                    return Ok(stale_page(served));
                }
                checked = true;
            }
            if batch.len() >= LISTED_BATCH {
                let batch = std::mem::take(&mut batch);
                if checked && unchecked.is_empty() {
                    items.extend(self.store.listed(batch));
                } else {
                    unchecked.extend(self.store.listed_unchecked(batch));
                }
            }
        }
        let mut list = stream.finish()?;
        if self.goes_back(requested, &list.resource_version) {
            return Ok(stale_page(&list.resource_version));
        }
        batch.extend(std::mem::take(&mut list.items).into_iter().map(Arc::new));
        if !unchecked.is_empty() {
            unchecked.extend(self.store.listed_unchecked(batch));
            items.append(&mut unchecked);
        } else if !batch.is_empty() {
            items.extend(self.store.listed(batch));
        }
        Ok(list)
    }

    pub(super) async fn list(&mut self, rv: String) -> Result<State<L::Body>, StoreClosed> {
        let mut rv = rv;
        loop {
            // An Expired/TooLarge/stale answer for a specific version is retried at once with
            // "" (client-go retries immediately); on "" it waits for the backoff.
            let retry_now = !rv.is_empty();
            match self.list_all(&rv).await {
                Ok((items, served, paginated)) => {
                    if self.goes_back(&rv, &served) {
                        ReflectorMetrics::inc(&self.metrics.stale_lists);
                        self.report(&ReflectorError::StaleList {
                            requested: rv.clone(),
                            served,
                            synced: self.last_rv.clone(),
                        });
                        self.last_rv_unavailable = true;
                        if retry_now {
                            rv = String::new();
                            continue;
                        }
                        let next = self.relist();
                        return Ok(self.backoff_then(next, None));
                    }
                    if rv == "0" && paginated {
                        self.paginated_result = true;
                    }
                    // Counted before the store publishes, so that whoever sees the informer
                    // synced also sees the list in the metrics.
                    self.set_listed(&served);
                    self.store.replace(items, &served)?;
                    return Ok(State::Watch {
                        resource_version: self.last_rv.clone(),
                    });
                }
                Err(source) => {
                    let unavailable = is_version_unavailable(&source);
                    let wait = retry_after(&source);
                    self.report(&ReflectorError::ListFailed {
                        resource_version: rv.clone(),
                        source,
                    });
                    if unavailable {
                        self.last_rv_unavailable = true;
                        if retry_now {
                            rv = String::new();
                            continue;
                        }
                    }
                    let next = self.relist();
                    return Ok(self.backoff_then(next, wait));
                }
            }
        }
    }
}

/// The metadata of a page refused as stale: its version, and no continue token (so no page
/// follows).
fn stale_page(served: &str) -> ObjectList {
    ObjectList {
        list_gvk: Default::default(),
        resource_version: served.to_owned(),
        continue_token: String::new(),
        remaining_item_count: None,
        items: Vec::new(),
    }
}
