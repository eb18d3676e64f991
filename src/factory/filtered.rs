//! [`Filtered`]: a lister-watcher whose every request gets the factory's selectors and tweak
//! hook ([`RequestOptions`], [`TweakOptions`]).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::reflector::{
    ApiError, ListBody, ListOptions, ListerWatcher, WatchOptions, WatchResponse,
};

/// The options of one request, as handed to a tweak hook (client-go `TweakListOptionsFunc`
/// edits `metav1.ListOptions`, which serves lists and watches alike; here they are two types).
#[derive(Debug)]
pub enum RequestOptions<'a> {
    /// A list page.
    List(&'a mut ListOptions),
    /// A watch.
    Watch(&'a mut WatchOptions),
}

impl RequestOptions<'_> {
    /// The `labelSelector` of either kind of request.
    pub fn label_selector_mut(&mut self) -> &mut Option<String> {
        match self {
            RequestOptions::List(o) => &mut o.label_selector,
            RequestOptions::Watch(o) => &mut o.label_selector,
        }
    }

    /// The `fieldSelector` of either kind of request.
    pub fn field_selector_mut(&mut self) -> &mut Option<String> {
        match self {
            RequestOptions::List(o) => &mut o.field_selector,
            RequestOptions::Watch(o) => &mut o.field_selector,
        }
    }
}

/// A hook run on the options of every list and watch, after the selectors are set.
pub type TweakOptions = Arc<dyn Fn(RequestOptions<'_>) + Send + Sync>;

/// Selectors and a tweak hook applied to every request.
#[derive(Clone, Default)]
pub(super) struct Filters {
    pub(super) label_selector: Option<String>,
    pub(super) field_selector: Option<String>,
    pub(super) tweak: Option<TweakOptions>,
}

impl Filters {
    fn apply(&self, mut opts: RequestOptions<'_>) {
        if let Some(s) = &self.label_selector {
            *opts.label_selector_mut() = Some(s.clone());
        }
        if let Some(s) = &self.field_selector {
            *opts.field_selector_mut() = Some(s.clone());
        }
        if let Some(t) = &self.tweak {
            t(opts);
        }
    }
}

/// A [`ListerWatcher`] whose every list and watch gets the factory's label and field selectors
/// and tweak hook (client-go `NewFilteredListWatchFromClient` / `NewFiltered...Informer`).
pub struct Filtered<L> {
    pub(super) inner: L,
    pub(super) filters: Filters,
}

impl<L> Filtered<L> {
    /// `inner` with no selectors and no hook (what a standalone typed informer wraps).
    pub fn unfiltered(inner: L) -> Self {
        Filtered {
            inner,
            filters: Filters::default(),
        }
    }

    /// The wrapped lister-watcher.
    pub fn inner(&self) -> &L {
        &self.inner
    }
}

impl<L> fmt::Debug for Filtered<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Filtered")
            .field("label_selector", &self.filters.label_selector)
            .field("field_selector", &self.filters.field_selector)
            .field("tweak", &self.filters.tweak.is_some())
            .finish_non_exhaustive()
    }
}

impl<L: ListerWatcher> ListerWatcher for Filtered<L> {
    type Body = L::Body;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        let mut opts = opts.clone();
        self.filters.apply(RequestOptions::List(&mut opts));
        self.inner.list(&opts).await
    }

    async fn list_chunks(&self, opts: &ListOptions) -> Result<ListBody<L::Body>, ApiError> {
        let mut opts = opts.clone();
        self.filters.apply(RequestOptions::List(&mut opts));
        self.inner.list_chunks(&opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<L::Body>, ApiError> {
        let mut opts = opts.clone();
        self.filters.apply(RequestOptions::Watch(&mut opts));
        self.inner.watch(&opts).await
    }

    fn describe(&self) -> String {
        let mut d = self.inner.describe();
        if let Some(l) = &self.filters.label_selector {
            d.push_str(&format!(" labelSelector={l}"));
        }
        if let Some(f) = &self.filters.field_selector {
            d.push_str(&format!(" fieldSelector={f}"));
        }
        d
    }
}
