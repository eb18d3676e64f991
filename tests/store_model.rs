//! Model-based test of the store: random sequences of apply / replace / bookmark /
//! add_indexers (including failing index functions) against a plain `HashMap` whose indexes are
//! recomputed from scratch. Every read on the latest version and on snapshots held across later
//! writes must equal the model at that snapshot's version. Runs for 1, 2 and 64 shards.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use informer::object::ObjectMetaFields;
use informer::object::{
    Encoding, GroupVersionKind, Object, ObjectKey, ObjectMeta, OwnerReference,
    parse_resource_version,
};
use informer::store::{
    IndexError, IndexFunc, IndexValues, LABELS_INDEX, NAMESPACE_INDEX, OWNER_UID_INDEX, Snapshot,
    Store, StoreConfig, StoreError, UID_INDEX, WriteBatch, index_func, labels_index_func,
    namespace_index_func, owner_uid_index_func, store, uid_index_func,
};
use proptest::prelude::*;

/// Fails on objects labelled `bad`; else indexes by label `k0`.
fn strict() -> IndexFunc {
    index_func(|o| {
        if o.meta().labels().contains_key("bad") {
            return Err(IndexError::new("bad"));
        }
        Ok(o.meta()
            .labels()
            .get("k0")
            .map(|v| v.to_string())
            .into_iter()
            .collect())
    })
}

/// Fails on objects with `k1=v1`; else every label value, possibly repeated.
fn picky() -> IndexFunc {
    index_func(|o| {
        if o.meta().labels().get("k1") == Some("v1") {
            return Err(IndexError::new("picky"));
        }
        let mut v: IndexValues = o.meta().labels().values().map(|v| v.to_string()).collect();
        v.extend(o.meta().labels().values().map(|v| v.to_string()));
        Ok(v)
    })
}

fn addable(i: u8) -> (&'static str, IndexFunc) {
    match i % 4 {
        0 => (LABELS_INDEX, labels_index_func()),
        1 => (OWNER_UID_INDEX, owner_uid_index_func()),
        2 => (UID_INDEX, uid_index_func()),
        _ => ("picky", picky()),
    }
}

#[derive(Clone, Debug)]
struct Spec {
    ns: u8,
    name: u8,
    labels: Vec<(u8, u8)>,
    owners: Vec<u8>,
    bad: bool,
    rv: u8,
}

impl Spec {
    fn namespace(&self) -> String {
        if self.ns == 0 {
            String::new()
        } else {
            format!("ns{}", self.ns)
        }
    }

    fn build(&self) -> Arc<Object> {
        let mut meta = ObjectMetaFields {
            name: format!("n{}", self.name).into(),
            namespace: self.namespace().into(),
            uid: format!("u{}", self.name % 3).into(),
            resource_version: if self.rv == 0 {
                String::new().into()
            } else {
                self.rv.to_string().into()
            },
            ..Default::default()
        };
        for (k, v) in &self.labels {
            meta.labels
                .insert(format!("k{k}").into(), format!("v{v}").into());
        }
        if self.bad {
            meta.labels.insert("bad".into(), "1".into());
        }
        meta.owner_references = self
            .owners
            .iter()
            .map(|o| OwnerReference {
                uid: format!("o{o}").into(),
                ..OwnerReference::default()
            })
            .collect();
        Arc::new(Object::from_parts(
            Arc::new(GroupVersionKind::new("", "v1", "Pod")),
            ObjectMeta::from(meta),
            Bytes::new(),
            Encoding::Protobuf,
        ))
    }
}

#[derive(Clone, Debug)]
enum OpSpec {
    Upsert(Spec),
    Delete(u8, u8),
}

#[derive(Clone, Debug)]
enum Step {
    Apply(Vec<OpSpec>, Option<u8>),
    Replace(Vec<Spec>, u8),
    Bookmark(u8),
    AddIndexer(u8),
    Hold,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0u8..3,
        0u8..8,
        prop::collection::vec((0u8..3, 0u8..3), 0..3),
        prop::collection::vec(0u8..3, 0..3),
        prop::bool::weighted(0.05),
        0u8..60,
    )
        .prop_map(|(ns, name, labels, owners, bad, rv)| Spec {
            ns,
            name,
            labels,
            owners,
            bad,
            rv,
        })
}

fn step() -> impl Strategy<Value = Step> {
    let op = prop_oneof![
        3 => spec().prop_map(OpSpec::Upsert),
        1 => (0u8..3, 0u8..8).prop_map(|(ns, n)| OpSpec::Delete(ns, n)),
    ];
    prop_oneof![
        8 => (prop::collection::vec(op, 0..40), prop::option::of(0u8..60)).prop_map(|(o, rv)| Step::Apply(o, rv)),
        1 => (prop::collection::vec(spec(), 0..10), 0u8..60).prop_map(|(s, rv)| Step::Replace(s, rv)),
        1 => (0u8..60).prop_map(Step::Bookmark),
        1 => (0u8..4).prop_map(Step::AddIndexer),
        1 => Just(Step::Hold),
    ]
}

/// The reference: a map of objects, a resourceVersion, and index functions whose indexes are
/// recomputed from scratch on every check.
#[derive(Clone)]
struct Model {
    items: HashMap<String, Arc<Object>>,
    rv: u64,
    indexes: Vec<(String, IndexFunc)>,
}

impl Model {
    fn indexable(&self, obj: &Object) -> bool {
        self.indexes.iter().all(|(_, f)| f(obj).is_ok())
    }

    fn index(&self, name: &str) -> BTreeMap<String, BTreeSet<String>> {
        let (_, f) = self.indexes.iter().find(|(n, _)| n == name).unwrap();
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (k, o) in &self.items {
            for v in f(o).unwrap() {
                out.entry(v).or_default().insert(k.clone());
            }
        }
        out
    }
}

fn key_strings<'a>(keys: impl IntoIterator<Item = &'a ObjectKey>) -> Vec<String> {
    keys.into_iter().map(|k| k.to_string()).collect()
}

/// Every read on `snap` equals the model.
fn check(snap: &Snapshot, m: &Model) {
    assert_eq!(snap.resource_version(), m.rv);
    assert_eq!(snap.len(), m.items.len());
    assert_eq!(snap.iter().count(), m.items.len());
    let mut keys = key_strings(&snap.keys());
    keys.sort();
    let mut model_keys: Vec<String> = m.items.keys().cloned().collect();
    model_keys.sort();
    assert_eq!(keys, model_keys);
    for (k, o) in &m.items {
        assert!(
            Arc::ptr_eq(snap.get(k.as_str()).expect("present"), o),
            "{k}"
        );
    }
    assert!(snap.get("ns9/absent").is_none());
    let names: Vec<&str> = snap.index_names().collect();
    let model_names: Vec<&str> = m.indexes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, model_names);
    for (name, f) in &m.indexes {
        let expected = m.index(name);
        let values: Vec<String> = snap
            .index_values(name)
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert_eq!(
            values,
            expected.keys().cloned().collect::<Vec<_>>(),
            "values of {name}"
        );
        for (v, ks) in &expected {
            let want: Vec<String> = ks.iter().cloned().collect();
            assert_eq!(key_strings(&snap.index_keys(name, v).unwrap()), want);
            let objs = snap.by_index(name, v).unwrap();
            assert_eq!(
                objs.iter().map(|o| o.key().to_string()).collect::<Vec<_>>(),
                want
            );
        }
        assert!(snap.index_keys(name, "no-such-value").unwrap().is_empty());
        for o in m.items.values() {
            let want: BTreeSet<String> = f(o)
                .unwrap()
                .iter()
                .flat_map(|v| expected.get(v).into_iter().flatten().cloned())
                .collect();
            let got: Vec<String> = snap
                .index(name, o)
                .unwrap()
                .iter()
                .map(|o| o.key().to_string())
                .collect();
            assert_eq!(got, want.into_iter().collect::<Vec<_>>());
        }
    }
    for i in 0..4 {
        let (name, _) = addable(i);
        if !m.indexes.iter().any(|(n, _)| n == name) {
            assert_eq!(
                snap.by_index(name, "x").unwrap_err(),
                StoreError::UnknownIndex {
                    name: name.to_owned()
                }
            );
        }
    }
}

fn check_store(r: &Store, m: &Model) {
    assert_eq!(r.len(), m.items.len());
    assert_eq!(r.resource_version(), m.rv);
    check(&r.snapshot(), m);
}

fn run(shards: usize, steps: Vec<Step>) {
    let (r, mut w) = store(
        StoreConfig::default()
            .shards(shards)
            .indexer("strict", strict()),
    );
    let mut m = Model {
        items: HashMap::new(),
        rv: 0,
        indexes: vec![
            (NAMESPACE_INDEX.to_owned(), namespace_index_func()),
            ("strict".to_owned(), strict()),
        ],
    };
    let mut held: Vec<(Snapshot, Model)> = Vec::new();
    for step in steps {
        let generation = r.snapshot().generation();
        match step {
            Step::Apply(ops, rv) => {
                let mut batch = WriteBatch::new();
                let mut next = m.clone();
                let mut ok = true;
                let mut previous = Vec::new();
                let mut max_rv = None;
                for op in &ops {
                    match op {
                        OpSpec::Upsert(s) => {
                            let obj = s.build();
                            ok &= next.indexable(&obj);
                            max_rv = max_rv.max(parse_resource_version(obj.resource_version()));
                            previous.push(next.items.insert(obj.key().to_string(), obj.clone()));
                            batch.add(obj);
                        }
                        OpSpec::Delete(ns, n) => {
                            let key = ObjectKey::new(
                                &Spec {
                                    ns: *ns,
                                    name: 0,
                                    labels: vec![],
                                    owners: vec![],
                                    bad: false,
                                    rv: 0,
                                }
                                .namespace(),
                                &format!("n{n}"),
                            );
                            previous.push(next.items.remove(key.as_str()));
                            batch.delete(key);
                        }
                    }
                }
                if let Some(rv) = rv {
                    batch.set_resource_version(u64::from(rv));
                }
                next.rv = rv.map(u64::from).or(max_rv).unwrap_or(m.rv).max(m.rv);
                match w.apply(batch) {
                    Ok(prev) => {
                        assert!(ok, "store accepted a batch an index function rejects");
                        assert_eq!(prev.len(), previous.len());
                        for (a, b) in prev.iter().zip(&previous) {
                            match (a, b) {
                                (None, None) => {}
                                (Some(a), Some(b)) => assert!(Arc::ptr_eq(a, b)),
                                _ => panic!("previous objects differ"),
                            }
                        }
                        m = next;
                    }
                    Err(e) => {
                        assert!(!ok, "unexpected {e:?}");
                        assert!(matches!(e, StoreError::IndexFunc { .. }));
                        assert_eq!(r.snapshot().generation(), generation);
                    }
                }
            }
            Step::Replace(specs, rv) => {
                let objs: Vec<Arc<Object>> = specs.iter().map(Spec::build).collect();
                let ok = objs.iter().all(|o| m.indexable(o));
                match w.replace(objs.clone(), u64::from(rv)) {
                    Ok(()) => {
                        assert!(ok);
                        m.items = objs.into_iter().map(|o| (o.key().to_string(), o)).collect();
                        m.rv = u64::from(rv);
                    }
                    Err(e) => {
                        assert!(!ok, "unexpected {e:?}");
                        assert_eq!(r.snapshot().generation(), generation);
                    }
                }
            }
            Step::Bookmark(rv) => {
                w.bookmark(u64::from(rv));
                m.rv = m.rv.max(u64::from(rv));
            }
            Step::AddIndexer(i) => {
                let (name, f) = addable(i);
                let exists = m.indexes.iter().any(|(n, _)| n == name);
                let ok = m.items.values().all(|o| f(o).is_ok());
                match w.add_indexer(name, f.clone()) {
                    Ok(()) => {
                        assert!(!exists && ok);
                        m.indexes.push((name.to_owned(), f));
                    }
                    Err(StoreError::IndexExists { .. }) => assert!(exists),
                    Err(StoreError::IndexFunc { .. }) => assert!(!exists && !ok),
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
            Step::Hold => held.push((r.snapshot(), m.clone())),
        }
        check_store(&r, &m);
    }
    for (snap, model) in &held {
        check(snap, model);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn model_1_shard(steps in prop::collection::vec(step(), 1..30)) {
        run(1, steps);
    }

    #[test]
    fn model_2_shards(steps in prop::collection::vec(step(), 1..30)) {
        run(2, steps);
    }

    #[test]
    fn model_64_shards(steps in prop::collection::vec(step(), 1..30)) {
        run(64, steps);
    }
}
