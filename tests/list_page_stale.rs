//! The reflector's `list_page` (listed / listed_unchecked / replace) and `ListBuffer`, from a
//! fresh helper's review: a scripted lister whose list bodies arrive in chunks of many sizes
//! (empty ones, ones over a MiB), and a store that records every call. Checked: a stale list passes nothing to `listed` (what a
//! paged relist's store queues at once) nor to `replace`; an accepted list's objects reach
//! `listed` + `replace` exactly once each, in the server's order; no byte is lost or doubled
//! (the objects equal `decode_list` of the whole body).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use informer::object::{ApiStatus, GroupVersionKind, Object, decode_list, encode_envelope};
use informer::reflector::{
    ApiError, Body, ListBody, ListOptions, ListerWatcher, Reflector, ReflectorConfig,
    ReflectorStore, StoreClosed, WatchChange, WatchOptions, WatchResponse,
};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Begins,
    Listed(Vec<String>),
    Unchecked(Vec<String>),
    Replace(Vec<String>, String),
}

/// Records calls; `listed` takes everything (as a DeltaFIFO relisting page by page does).
#[derive(Default)]
struct Recorder(Mutex<Vec<Call>>);

fn names(items: &[Arc<Object>]) -> Vec<String> {
    items.iter().map(|o| o.name().to_string()).collect()
}

impl ReflectorStore for Recorder {
    fn replace(&self, items: Vec<Arc<Object>>, rv: &str) -> Result<(), StoreClosed> {
        self.0
            .lock()
            .unwrap()
            .push(Call::Replace(names(&items), rv.to_owned()));
        Ok(())
    }
    fn apply(&self, _: Vec<WatchChange>) -> Result<(), StoreClosed> {
        Ok(())
    }
    fn list_begins(&self, _paged: bool) {
        self.0.lock().unwrap().push(Call::Begins);
    }
    fn listed(&self, items: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        self.0.lock().unwrap().push(Call::Listed(names(&items)));
        Vec::new()
    }
    fn listed_unchecked(&self, items: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        self.0.lock().unwrap().push(Call::Unchecked(names(&items)));
        items
    }
}

struct Chunks(VecDeque<Bytes>);

impl Body for Chunks {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        self.0.pop_front().map(Ok)
    }
}

struct Script {
    lists: Mutex<VecDeque<Vec<Bytes>>>,
}

impl ListerWatcher for Script {
    type Body = Chunks;

    async fn list(&self, _: &ListOptions) -> Result<Bytes, ApiError> {
        unreachable!("list_chunks is used")
    }

    async fn list_chunks(&self, _: &ListOptions) -> Result<ListBody<Chunks>, ApiError> {
        let next = self.lists.lock().unwrap().pop_front();
        match next {
            Some(chunks) => Ok(ListBody::Chunks(Chunks(chunks.into()))),
            None => std::future::pending().await,
        }
    }

    async fn watch(&self, _: &WatchOptions) -> Result<WatchResponse<Chunks>, ApiError> {
        // Every watch fails as expired: the reflector relists.
        Err(ApiError::Status(ApiStatus {
            code: 410,
            status: "Failure".into(),
            reason: "Expired".into(),
            message: "too old".into(),
            cause_reasons: Vec::new(),
            retry_after_seconds: None,
        }))
    }
}

const PAD: usize = 3000;

fn json_item(name: &str, own_kind: bool) -> String {
    let head = if own_kind {
        r#""apiVersion":"v1","kind":"Pod","#
    } else {
        ""
    };
    format!(
        r#"{{{head}"metadata":{{"name":"{name}","namespace":"ns"}},"pad":"{}\"]}}{{"}}"#,
        "x".repeat(PAD)
    )
}

/// A JSON list of `n` items named `{tag}-{i}`; its metadata before or after its items.
fn json_list(tag: &str, n: usize, rv: &str, metadata_first: bool, own_kind: bool) -> Bytes {
    let items: Vec<String> = (0..n)
        .map(|i| json_item(&format!("{tag}-{i}"), own_kind))
        .collect();
    let items = items.join(",\n");
    let body = if metadata_first {
        format!(
            r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{items}]}}"#
        )
    } else {
        format!(
            r#"{{"apiVersion":"v1","items":[{items}],"kind":"PodList","metadata":{{"resourceVersion":"{rv}"}}}}"#
        )
    };
    Bytes::from(body)
}

fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn field(number: u32, payload: &[u8], out: &mut Vec<u8>) {
    varint(u64::from(number << 3 | 2), out);
    varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

/// A protobuf list whose `ListMeta` comes before the items (`rv_before`) and again after
/// them (`rv_after`): protobuf merges, so the list's version is `rv_after`.
fn protobuf_list_two_metas(tag: &str, n: usize, rv_before: &str, rv_after: &str) -> Bytes {
    let meta = |rv: &str| {
        let mut m = Vec::new();
        field(2, rv.as_bytes(), &mut m);
        m
    };
    let mut raw = Vec::new();
    field(1, &meta(rv_before), &mut raw);
    for i in 0..n {
        let mut om = Vec::new();
        field(1, format!("{tag}-{i}").as_bytes(), &mut om);
        let mut pod = Vec::new();
        field(1, &om, &mut pod);
        field(2, &vec![0u8; PAD], &mut pod);
        field(2, &pod, &mut raw);
    }
    field(1, &meta(rv_after), &mut raw);
    encode_envelope(&GroupVersionKind::new("", "v1", "PodList"), &raw)
}

/// `body` cut into chunks of sizes drawn from `sizes` in turn (0 = an empty chunk).
fn cut(body: &Bytes, sizes: &[usize]) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while at < body.len() {
        let n = sizes[k % sizes.len()];
        k += 1;
        let end = (at + n).min(body.len());
        out.push(body.slice(at..end));
        at = end;
    }
    out
}

/// What each list (from one `Begins` to the next) handed over: (listed, unchecked, replace).
struct ListCalls {
    listed: Vec<String>,
    unchecked: Vec<String>,
    replace: Option<(Vec<String>, String)>,
}

fn by_list(calls: &[Call]) -> Vec<ListCalls> {
    let mut out: Vec<ListCalls> = Vec::new();
    for c in calls {
        match c {
            Call::Begins => out.push(ListCalls {
                listed: Vec::new(),
                unchecked: Vec::new(),
                replace: None,
            }),
            Call::Listed(n) => out.last_mut().unwrap().listed.extend(n.iter().cloned()),
            Call::Unchecked(n) => out.last_mut().unwrap().unchecked.extend(n.iter().cloned()),
            Call::Replace(n, rv) => out.last_mut().unwrap().replace = Some((n.clone(), rv.clone())),
        }
    }
    out
}

fn expected(body: &Bytes) -> Vec<String> {
    decode_list(body.clone())
        .unwrap()
        .items
        .iter()
        .map(|o| o.name().to_string())
        .collect()
}

/// Runs the reflector over `lists` (each cut by `sizes`) until they are all served, and
/// returns the store's calls grouped by list.
fn run_script(lists: &[Bytes], sizes: &[usize]) -> Vec<ListCalls> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let script = Arc::new(Script {
        lists: Mutex::new(lists.iter().map(|b| cut(b, sizes)).collect()),
    });
    let store = Arc::new(Recorder::default());
    let config = ReflectorConfig::default().page_size(0).seed(Some(1));
    let reflector = Reflector::new(script.clone(), store.clone(), config);
    rt.block_on(async {
        let task = tokio::spawn(reflector.run());
        for _ in 0..10_000 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if script.lists.lock().unwrap().is_empty() {
                // Let the last list finish.
                tokio::time::sleep(Duration::from_secs(5)).await;
                break;
            }
        }
        task.abort();
    });
    let calls = store.0.lock().unwrap().clone();
    let mut lists = by_list(&calls);
    // A list begun after the script ran out waits forever: it passed nothing on.
    while lists
        .last()
        .is_some_and(|l| l.listed.is_empty() && l.unchecked.is_empty() && l.replace.is_none())
        && lists.len() > 1
    {
        lists.pop();
    }
    lists
}

fn check(lists: &[Bytes], stale: &[bool], sizes: &[usize]) {
    let got = run_script(lists, sizes);
    assert_eq!(got.len(), lists.len(), "sizes {sizes:?}");
    for (i, ((body, &is_stale), calls)) in lists.iter().zip(stale).zip(&got).enumerate() {
        let want = expected(body);
        if is_stale {
            assert!(
                calls.listed.is_empty(),
                "list {i} (stale) had {} objects queued through listed (sizes {sizes:?})",
                calls.listed.len()
            );
            assert!(calls.replace.is_none(), "list {i} (stale) replaced");
        } else {
            let (replaced, rv) = calls.replace.clone().expect("an accepted list replaces");
            assert_eq!(rv, decode_list(body.clone()).unwrap().resource_version);
            let mut all = calls.listed.clone();
            all.extend(replaced);
            assert_eq!(all, want, "list {i}: objects lost, doubled or reordered");
            // What went through listed_unchecked reached replace, after what was listed.
            if !calls.unchecked.is_empty() {
                assert!(
                    calls.listed.is_empty()
                        || calls.unchecked.iter().all(|n| !calls.listed.contains(n))
                );
            }
        }
    }
}

#[test]
fn json_lists_stale_or_not_in_either_member_order() {
    let lists = [
        json_list("a", 600, "10", false, true), // first list: version last
        json_list("b", 600, "5", false, true),  // stale, version last
        json_list("c", 600, "20", true, false), // version first
        json_list("d", 600, "15", true, true),  // stale, version first
        json_list("e", 300, "30", false, false), // no kind before items: all wait
        json_list("f", 600, "25", false, false), // stale, all wait
        json_list("g", 600, "40", false, true),
    ];
    let stale = [false, true, false, true, false, true, false];
    for sizes in [
        vec![usize::MAX],
        vec![1 << 20],
        vec![(1 << 20) + 1],
        vec![4096, 0, 65_536, 1],
        vec![8192, (1 << 20) + 7, 3, 0, 0, 400_000],
        vec![2 << 20, 1, 2 << 20],
        vec![1_048_575, 1, 1_048_576],
    ] {
        check(&lists, &stale, &sizes);
    }
}

#[test]
fn a_protobuf_list_with_a_second_older_list_meta_never_replaces() {
    // Protobuf merges two ListMetas: the list's version would be the last one (7), older than
    // the one delivered (100) and than the first one (200), which the reflector checked before
    // passing the items between them on. Whether the stream refuses the second ListMeta (it
    // does: `shapes_no_api_server_writes_are_refused_with_a_typed_error` in list_stream.rs
    // pins that) or the merged version were refused as stale at the end, the list must not
    // replace, and the next list must. (The objects passed on before the second ListMeta were
    // checked at the first version; a list that fails after passing objects on is abandoned,
    // as any list that fails.)
    let lists = [
        json_list("a", 10, "100", true, true),
        protobuf_list_two_metas("p", 600, "200", "7"),
        json_list("c", 10, "300", true, true),
    ];
    assert_eq!(decode_list(lists[1].clone()).unwrap().resource_version, "7");
    let got = run_script(&lists, &[65_536]);
    assert_eq!(got.len(), 3);
    assert!(got[1].replace.is_none());
    assert_eq!(got[2].replace.as_ref().unwrap().1, "300");
}

#[test]
fn a_json_list_with_an_early_version_and_a_bad_end_queues_no_stale_object() {
    // The metadata comes first and passes; then the list turns out broken: its objects went
    // to `listed`, but the list never replaces (it fails and is retried).
    let mut broken = json_list("b", 600, "50", true, true).to_vec();
    broken.extend_from_slice(b"x");
    let lists = [
        json_list("a", 10, "10", true, true),
        Bytes::from(broken),
        json_list("c", 10, "60", true, true),
    ];
    let got = run_script(&lists, &[65_536]);
    assert_eq!(got.len(), 3);
    assert!(got[1].replace.is_none());
    assert_eq!(got[2].replace.as_ref().unwrap().1, "60");
}
