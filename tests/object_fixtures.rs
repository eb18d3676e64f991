//! The decoders against real Kubernetes bytes in `../shared/fixtures` (read in place, never
//! copied into the repository).

use std::path::{Path, PathBuf};

use bytes::Bytes;
use informer::object::{self, Encoding, ObjectMeta, StrMap, Time};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures")
}

fn read(path: &Path) -> Bytes {
    Bytes::from(std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    v.sort();
    v
}

fn s(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_owned()
}

fn ts(v: &Value, k: &str) -> Option<i64> {
    let t = v.get(k)?.as_str()?;
    Some(t.parse::<jiff::Timestamp>().unwrap().as_second())
}

fn map(v: &Value, k: &str) -> StrMap {
    v.get(k)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Compares decoded metadata with the JSON document's `metadata`, field by field, reading the
/// JSON with serde_json directly (independently of our JSON decoder).
fn assert_meta_matches(meta: &ObjectMeta, json: &Value, what: &str) {
    let m = &json["metadata"];
    assert_eq!(meta.name(), s(m, "name"), "{what}: name");
    assert_eq!(
        meta.generate_name(),
        s(m, "generateName"),
        "{what}: generateName"
    );
    assert_eq!(meta.namespace(), s(m, "namespace"), "{what}: namespace");
    assert_eq!(meta.uid(), s(m, "uid"), "{what}: uid");
    assert_eq!(
        meta.resource_version(),
        s(m, "resourceVersion"),
        "{what}: resourceVersion"
    );
    assert_eq!(
        meta.generation().unwrap_or(0),
        m.get("generation").and_then(Value::as_i64).unwrap_or(0),
        "{what}: generation"
    );
    assert_eq!(
        meta.creation_timestamp().map(|t| t.seconds),
        ts(m, "creationTimestamp"),
        "{what}: creationTimestamp"
    );
    assert_eq!(
        meta.deletion_timestamp().map(|t| t.seconds),
        ts(m, "deletionTimestamp"),
        "{what}: deletionTimestamp"
    );
    assert_eq!(
        meta.deletion_grace_period_seconds(),
        m.get("deletionGracePeriodSeconds").and_then(Value::as_i64),
        "{what}: deletionGracePeriodSeconds"
    );
    assert_eq!(meta.labels(), map(m, "labels"), "{what}: labels");
    assert_eq!(
        meta.annotations(),
        map(m, "annotations"),
        "{what}: annotations"
    );
    let owners: Vec<Value> = m
        .get("ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        meta.owner_references().len(),
        owners.len(),
        "{what}: ownerReferences"
    );
    for (o, j) in meta.owner_references().zip(&owners) {
        assert_eq!(
            o.api_version,
            s(j, "apiVersion"),
            "{what}: owner apiVersion"
        );
        assert_eq!(o.kind, s(j, "kind"), "{what}: owner kind");
        assert_eq!(o.name, s(j, "name"), "{what}: owner name");
        assert_eq!(o.uid, s(j, "uid"), "{what}: owner uid");
        assert_eq!(
            o.controller.unwrap_or(false),
            j.get("controller")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            "{what}: owner controller"
        );
        assert_eq!(
            o.block_owner_deletion.unwrap_or(false),
            j.get("blockOwnerDeletion")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            "{what}: owner blockOwnerDeletion"
        );
    }
    let finalizers: Vec<String> = m
        .get("finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    assert_eq!(
        meta.finalizers().collect::<Vec<_>>(),
        finalizers,
        "{what}: finalizers"
    );
    let managed = m
        .get("managedFields")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    assert_eq!(
        meta.managed_fields().len(),
        managed,
        "{what}: managedFields entries"
    );
}

/// Kinds whose field 1 is not `ObjectMeta` (request/review wrappers, options, lists, Status):
/// the JSON has no `metadata` member with a name, uid or labels.
fn has_object_meta(json: &Value) -> bool {
    let kind = s(json, "kind");
    // Lists and Status carry ListMeta in field 1.
    json.get("metadata").is_some_and(Value::is_object)
        && !kind.ends_with("List")
        && kind != "Status"
}

fn check_testdata_dir(dir: &str) {
    let pbs = files(&format!("k8s-testdata/{dir}"), ".pb");
    assert!(pbs.len() >= 80, "{dir}: only {} .pb files", pbs.len());
    let mut with_meta = 0;
    for pb in &pbs {
        let name = pb.file_name().unwrap().to_string_lossy().into_owned();
        let input = read(pb);
        let env = object::decode_envelope(&input).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut json_path = pb.with_extension("json");
        if !json_path.exists() {
            // `X.after_roundtrip.pb` re-encodes the object of `X.json`.
            json_path = PathBuf::from(json_path.to_string_lossy().replace(".after_roundtrip", ""));
        }
        let json: Value = serde_json::from_slice(&read(&json_path)).unwrap();
        // The envelope's GVK is the file's group.version.Kind.
        assert_eq!(env.gvk.kind, s(&json, "kind"), "{name}: kind");
        assert_eq!(
            env.gvk.api_version(),
            s(&json, "apiVersion"),
            "{name}: apiVersion"
        );
        if !has_object_meta(&json) {
            continue;
        }
        let obj = object::decode(input.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(obj.encoding(), Encoding::Protobuf);
        assert_eq!(
            obj.raw().unwrap(),
            &env.raw,
            "{name}: raw is the envelope's raw"
        );
        assert_meta_matches(obj.meta(), &json, &name);
        // The JSON path agrees with the protobuf path on everything but managedFields' shape.
        let from_json = object::decode(read(&json_path)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (mut a, mut b) = (obj.meta().to_fields(), from_json.meta().to_fields());
        a.managed_fields.clear();
        b.managed_fields.clear();
        // JSON carries second precision; protobuf may carry nanos.
        for t in [&mut a.creation_timestamp, &mut a.deletion_timestamp]
            .into_iter()
            .flatten()
        {
            t.nanos = 0;
        }
        assert_eq!(a, b, "{name}: protobuf and JSON metadata differ");
        assert_eq!(from_json.gvk(), obj.gvk(), "{name}: gvk");
        with_meta += 1;
    }
    assert!(
        with_meta >= 50,
        "{dir}: only {with_meta} objects with metadata"
    );
}

#[test]
fn head_fixtures_decode_and_match_json() {
    check_testdata_dir("HEAD");
}

#[test]
fn v1_30_fixtures_decode_and_match_json() {
    check_testdata_dir("v1.30.0");
}

#[test]
fn v1_19_random_fixtures_decode_and_match_json() {
    // Non-ASCII strings, negative 10-byte varints, empty Time messages and field 15.
    check_testdata_dir("v1.19.0");
}

#[test]
fn head_pod_metadata_is_exact() {
    let obj = object::decode(read(&fixtures().join("k8s-testdata/HEAD/core.v1.Pod.pb"))).unwrap();
    let m = obj.meta();
    assert_eq!(obj.gvk().to_string(), "v1.Pod");
    assert_eq!(m.name(), "nameValue");
    assert_eq!(m.namespace(), "namespaceValue");
    assert_eq!(obj.key().as_str(), "namespaceValue/nameValue");
    assert_eq!(m.uid(), "uidValue");
    assert_eq!(m.generation(), Some(7));
    assert_eq!(m.deletion_grace_period_seconds(), Some(10));
    assert_eq!(
        m.creation_timestamp(),
        Some(Time {
            seconds: 1_199_149_261,
            nanos: 0
        })
    );
    assert_eq!(m.labels().get("labelsKey"), Some("labelsValue"));
    assert_eq!(m.owner_references().next().unwrap().controller, Some(true));
    assert!(m.finalizers().eq(["finalizersValue"]));
    // managedFields are kept raw and decode on demand.
    use prost::Message;
    let mf =
        informer::wire::meta::ManagedFieldsEntry::decode(m.managed_fields()[0].clone()).unwrap();
    assert_eq!(mf.manager.as_deref(), Some("managerValue"));
}

#[test]
fn typed_decode_agrees_with_metadata_path() {
    let obj = object::decode(read(&fixtures().join("k8s-testdata/HEAD/core.v1.Pod.pb"))).unwrap();
    let pod: k8s_pb::api::core::v1::Pod = obj.decode().unwrap();
    let pm = pod.metadata.as_ref().unwrap();
    let m = obj.meta();
    assert_eq!(pm.name.as_deref(), Some(m.name()));
    assert_eq!(pm.namespace.as_deref(), Some(m.namespace()));
    assert_eq!(pm.uid.as_deref(), Some(m.uid()));
    assert_eq!(pm.resource_version.as_deref(), Some(m.resource_version()));
    assert_eq!(pm.generation, m.generation());
    assert_eq!(
        pm.creation_timestamp.as_ref().and_then(|t| t.seconds),
        m.creation_timestamp().map(|t| t.seconds)
    );
    assert_eq!(pm.labels.len(), m.labels().len());
    for (k, v) in &m.labels() {
        assert_eq!(pm.labels.get(k).map(|s| &**s), Some(v));
    }
    assert_eq!(pm.owner_references.len(), m.owner_references().len());
    assert_eq!(
        pm.owner_references[0].uid.as_deref(),
        Some(m.owner_references().next().unwrap().uid)
    );
    assert_eq!(
        pm.finalizers,
        m.finalizers().map(|f| f.to_string()).collect::<Vec<_>>()
    );
    assert_eq!(pm.managed_fields.len(), m.managed_fields().len());
    // The rest of the object is there too.
    assert_eq!(
        pod.spec.as_ref().unwrap().containers[0].name.as_deref(),
        Some("nameValue")
    );
}

#[test]
fn raw_bytes_are_a_slice_of_the_input() {
    let input = read(&fixtures().join("k8s-testdata/HEAD/core.v1.Pod.pb"));
    let obj = object::decode(input.clone()).unwrap();
    let start = obj.raw().unwrap().as_ptr() as usize - input.as_ptr() as usize;
    assert!(
        start > 4 && start + obj.raw_len() <= input.len(),
        "raw is not inside the input"
    );
    assert_eq!(
        &input[start..start + obj.raw_len()],
        &obj.raw().unwrap()[..]
    );
}

fn etcd_json(name: &str) -> Value {
    serde_json::from_slice(&read(
        &fixtures().join("real/auger-etcd-real-protobuf").join(name),
    ))
    .unwrap()
}

#[test]
fn real_etcd_storage_values_decode() {
    for kind in ["pod", "job"] {
        let mut input = read(
            &fixtures()
                .join("real/auger-etcd-real-protobuf")
                .join(format!("storage__{kind}.bin")),
        );
        assert_eq!(input.last(), Some(&0x0a), "{kind}: the stray trailing byte");
        input.truncate(input.len() - 1);
        let obj = object::decode(input).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let json = etcd_json(&format!("json__{kind}.json"));
        assert_eq!(obj.gvk().kind, s(&json, "kind"));
        assert_meta_matches(obj.meta(), &json, kind);
        assert!(!obj.uid().is_empty());
    }
}

/// etcd's `mvccpb.KeyValue{1 key, 2 create_revision, 3 mod_revision, 4 version, 5 value}`.
fn kv_value(buf: &Bytes) -> (String, Bytes) {
    use prost::Message;
    let kv = informer::wire::etcd::KeyValue::decode(buf.clone()).unwrap();
    (String::from_utf8(kv.key.to_vec()).unwrap(), kv.value)
}

#[test]
fn real_etcd_boltdb_items_decode() {
    let mut seen = Vec::new();
    for i in 0..3 {
        let buf = read(
            &fixtures()
                .join("real/auger-etcd-real-protobuf")
                .join(format!("boltdb__page2item{i}.bin")),
        );
        let (key, value) = kv_value(&buf);
        let obj = object::decode(value).unwrap_or_else(|e| panic!("{key}: {e}"));
        // /registry/<resource>/<namespace>/<name> or /registry/<resource>/<name>
        let parts: Vec<&str> = key.trim_start_matches("/registry/").split('/').collect();
        assert_eq!(obj.name(), *parts.last().unwrap(), "{key}");
        if parts.len() == 3 {
            assert_eq!(obj.namespace(), parts[1], "{key}");
        }
        let json_name = match parts[0] {
            "pods" => Some("json__pod.json"),
            "jobs" => Some("json__job.json"),
            _ => None,
        };
        if let Some(j) = json_name {
            let json = etcd_json(j);
            assert_meta_matches(obj.meta(), &json, &key);
        }
        seen.push(obj.gvk().kind.clone());
    }
    seen.sort();
    assert_eq!(seen, ["Job", "Namespace", "Pod"]);
}

#[test]
fn openshift_objects_decode_through_json() {
    let mut n = 0;
    for dir in [
        "real/openshift-insights-real-objects/pods",
        "real/openshift-insights-real-objects/nodes",
    ] {
        for path in files(dir, ".json") {
            let input = read(&path);
            let json: Value = serde_json::from_slice(&input).unwrap();
            let obj = object::decode(input).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(obj.encoding(), Encoding::Json);
            assert_meta_matches(obj.meta(), &json, &path.display().to_string());
            assert!(!obj.name().is_empty());
            n += 1;
        }
    }
    assert_eq!(n, 9);
}

#[test]
fn pulumi_recordings_decode_through_json() {
    let mut n = 0;
    for dir in [
        "real/pulumi-watch-recordings/pod",
        "real/pulumi-watch-recordings/job",
    ] {
        for path in files(dir, ".json") {
            let states: Vec<Value> = serde_json::from_slice(&read(&path)).unwrap();
            for state in states {
                let bytes = Bytes::from(serde_json::to_vec(&state).unwrap());
                let obj = object::decode(bytes).unwrap();
                assert_meta_matches(obj.meta(), &state, &path.display().to_string());
                n += 1;
            }
        }
    }
    assert!(n > 20, "only {n} recorded states");
}
