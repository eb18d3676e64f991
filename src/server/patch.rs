//! The PATCH bodies a real API server applies, on an object's JSON document: JSON merge patch
//! (RFC 7386, `application/merge-patch+json`), JSON patch (RFC 6902,
//! `application/json-patch+json`) and strategic merge patch
//! (`application/strategic-merge-patch+json`, what kubectl sends), the last as a documented
//! subset of upstream `apimachinery/pkg/util/strategicpatch`.
//!
//! The strategic subset: maps merge as in a merge patch; a list of objects whose field has a
//! known merge key (containers, init and ephemeral containers, env, volumes and volume
//! mounts, ports, conditions, image pull secrets, host aliases, owner references, by the key
//! upstream's schemas give them) merges element by element on that key; other lists are
//! replaced. The directives `$patch: replace` and `$patch: delete` (in maps and list
//! elements), `$deleteFromPrimitiveList/<field>` and `$retainKeys` are honoured;
//! `$setElementOrder/<field>` is accepted and ignored (merged lists keep the stored order,
//! new elements go last).

use serde_json::{Map, Value};

/// A PATCH body's type, from its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/json-patch+json`.
    Json,
}

impl PatchType {
    /// The type of `content_type`, or `None` for one this server does not apply (server-side
    /// apply's `application/apply-patch+yaml` among them).
    pub(crate) fn of(content_type: &str) -> Option<Self> {
        match content_type.split(';').next().unwrap_or("").trim() {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/json-patch+json" => Some(PatchType::Json),
            _ => None,
        }
    }
}

/// Why a patch was not applied.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PatchError {
    /// The body is not a patch of its type (400 on a real server).
    Malformed(String),
    /// The patch does not apply to the object (422).
    Failed(String),
}

/// Applies `patch` (of type `t`) to `doc`.
///
/// # Errors
/// [`PatchError::Malformed`] for a body that is not valid JSON of its type;
/// [`PatchError::Failed`] for one that does not apply (a JSON patch `test` that fails, a path
/// that does not exist, an unknown directive, a list element without its merge key).
pub(crate) fn apply(t: PatchType, doc: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let p: Value = serde_json::from_slice(patch)
        .map_err(|e| PatchError::Malformed(format!("invalid JSON: {e}")))?;
    match t {
        PatchType::Merge => {
            if !p.is_object() {
                return Err(PatchError::Malformed(
                    "a merge patch must be a JSON object".into(),
                ));
            }
            Ok(merge(doc.clone(), &p))
        }
        PatchType::Strategic => {
            if !p.is_object() {
                return Err(PatchError::Malformed(
                    "a strategic merge patch must be a JSON object".into(),
                ));
            }
            strategic(doc.clone(), &p).map_err(PatchError::Failed)
        }
        PatchType::Json => {
            if !p.is_array() {
                return Err(PatchError::Malformed(
                    "a JSON patch must be an array of operations".into(),
                ));
            }
            json_patch(doc.clone(), &p).map_err(PatchError::Failed)
        }
    }
}

/// RFC 7386: members of the patch replace the target's, `null` removes, objects recurse.
fn merge(target: Value, patch: &Value) -> Value {
    let Value::Object(p) = patch else {
        return patch.clone();
    };
    let mut t = match target {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            let cur = t.remove(k).unwrap_or(Value::Null);
            t.insert(k.clone(), merge(cur, v));
        }
    }
    Value::Object(t)
}

/// The merge key of the list at member `field` (upstream's `patchMergeKey` tags).
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => "name",
        "readinessGates" => "conditionType",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        "conditions" => "type",
        "hostAliases" => "ip",
        "ownerReferences" => "uid",
        _ => return None,
    })
}

/// A strategic merge of `patch` into `target` (see the module docs).
fn strategic(target: Value, patch: &Value) -> Result<Value, String> {
    let Value::Object(p) = patch else {
        return Ok(patch.clone());
    };
    match p.get("$patch").map(|v| v.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => {
            let mut p = p.clone();
            p.remove("$patch");
            return Ok(Value::Object(p));
        }
        Some(Some("delete")) => {
            return Err("$patch: delete is only allowed in a list element".into());
        }
        Some(other) => return Err(format!("unknown patch type: {other:?} in $patch")),
    }
    let mut t = match target {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for (k, v) in p {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Value::Array(gone)) = (t.get_mut(list), v) {
                cur.retain(|x| !gone.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            return Err(format!("unknown directive {k:?}"));
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        let cur = t.remove(k).unwrap_or(Value::Null);
        let merged = match (cur, v, merge_key(k)) {
            (Value::Array(cur), Value::Array(items), Some(key)) => {
                Value::Array(merge_list(cur, items, key)?)
            }
            (cur, v @ Value::Object(_), _) => strategic(cur, v)?,
            (_, v, _) => v.clone(),
        };
        t.insert(k.clone(), merged);
    }
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        t.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    Ok(Value::Object(t))
}

/// Merges list `items` into `cur` element by element on `key`.
fn merge_list(mut cur: Vec<Value>, items: &[Value], key: &str) -> Result<Vec<Value>, String> {
    for item in items {
        let Some(id) = item.get(key).cloned() else {
            return Err(format!(
                "map: {item} does not contain declared merge key: {key}"
            ));
        };
        let at = cur.iter().position(|c| c.get(key) == Some(&id));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (at, delete) {
            (Some(i), true) => {
                cur.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => {
                let old = std::mem::take(&mut cur[i]);
                cur[i] = strategic(old, item)?;
            }
            (None, false) => {
                let mut item = item.clone();
                if let Value::Object(m) = &mut item {
                    m.remove("$patch");
                }
                cur.push(strategic(Value::Null, &item)?);
            }
        }
    }
    Ok(cur)
}

/// The path segments of an RFC 6901 JSON pointer.
fn pointer(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("invalid JSON pointer {path:?}"));
    };
    Ok(rest
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect())
}

/// The parent container of `segs` in `doc` and the last segment.
fn parent<'a>(doc: &'a mut Value, segs: &[String]) -> Result<(&'a mut Value, String), String> {
    let Some((last, init)) = segs.split_last() else {
        return Err("the path must not be the whole document".into());
    };
    let mut cur = doc;
    for s in init {
        cur = match cur {
            Value::Object(m) => m.get_mut(s),
            Value::Array(a) => s.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| format!("path segment {s:?} does not exist"))?;
    }
    Ok((cur, last.clone()))
}

fn get<'a>(doc: &'a Value, segs: &[String]) -> Option<&'a Value> {
    segs.iter().try_fold(doc, |cur, s| match cur {
        Value::Object(m) => m.get(s),
        Value::Array(a) => s.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn add(doc: &mut Value, segs: &[String], v: Value) -> Result<(), String> {
    if segs.is_empty() {
        *doc = v;
        return Ok(());
    }
    let (p, last) = parent(doc, segs)?;
    match p {
        Value::Object(m) => {
            m.insert(last, v);
            Ok(())
        }
        Value::Array(a) if last == "-" => {
            a.push(v);
            Ok(())
        }
        Value::Array(a) => match last.parse::<usize>() {
            Ok(i) if i <= a.len() => {
                a.insert(i, v);
                Ok(())
            }
            _ => Err(format!("array index {last:?} out of range")),
        },
        _ => Err("the parent is not an object or array".into()),
    }
}

fn remove(doc: &mut Value, segs: &[String]) -> Result<Value, String> {
    let (p, last) = parent(doc, segs)?;
    match p {
        Value::Object(m) => m
            .remove(&last)
            .ok_or_else(|| format!("member {last:?} does not exist")),
        Value::Array(a) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => Ok(a.remove(i)),
            _ => Err(format!("array index {last:?} out of range")),
        },
        _ => Err("the parent is not an object or array".into()),
    }
}

/// RFC 6902: `add`, `remove`, `replace`, `move`, `copy`, `test`, in order; all or nothing.
fn json_patch(mut doc: Value, patch: &Value) -> Result<Value, String> {
    let Value::Array(ops) = patch else {
        return Err("a JSON patch must be an array of operations".into());
    };
    for (i, op) in ops.iter().enumerate() {
        let field = |k: &str| op.get(k).and_then(Value::as_str);
        let name = field("op").ok_or_else(|| format!("operation {i}: no \"op\""))?;
        let path = pointer(field("path").ok_or_else(|| format!("operation {i}: no \"path\""))?)?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| format!("operation {i}: no \"value\""))
        };
        let from = || {
            field("from")
                .ok_or_else(|| format!("operation {i}: no \"from\""))
                .and_then(pointer)
        };
        let r = match name {
            "add" => add(&mut doc, &path, value()?),
            "remove" => remove(&mut doc, &path).map(drop),
            "replace" => remove(&mut doc, &path).and_then(|_| add(&mut doc, &path, value()?)),
            "move" => {
                let from = from()?;
                remove(&mut doc, &from).and_then(|v| add(&mut doc, &path, v))
            }
            "copy" => {
                let v = get(&doc, &from()?)
                    .cloned()
                    .ok_or_else(|| format!("operation {i}: \"from\" does not exist"))?;
                add(&mut doc, &path, v)
            }
            "test" => {
                if get(&doc, &path) == Some(&value()?) {
                    Ok(())
                } else {
                    Err("test failed".into())
                }
            }
            other => Err(format!("unknown operation {other:?}")),
        };
        r.map_err(|e| format!("operation {i} ({name}): {e}"))?;
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let doc = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        let p = br#"{"a": "z", "c": {"f": null, "h": 1}, "l": [3]}"#;
        assert_eq!(
            apply(PatchType::Merge, &doc, p).unwrap(),
            json!({"a": "z", "c": {"d": "e", "h": 1}, "l": [3]})
        );
        assert!(matches!(
            apply(PatchType::Merge, &doc, b"[1]"),
            Err(PatchError::Malformed(_))
        ));
        assert!(matches!(
            apply(PatchType::Merge, &doc, b"{"),
            Err(PatchError::Malformed(_))
        ));
    }

    #[test]
    fn strategic_patch_merges_lists_on_their_keys() {
        let doc = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}
        ], "finalizers": ["f1", "f2"], "args": ["x"]}});
        let p = br#"{"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [
                {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                {"name": "b", "$patch": "delete"},
                {"name": "c", "image": "c:1"}
            ],
            "$deleteFromPrimitiveList/finalizers": ["f1"],
            "args": ["y"]
        }}"#;
        assert_eq!(
            apply(PatchType::Strategic, &doc, p).unwrap(),
            json!({"spec": {"containers": [
                {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "c", "image": "c:1"}
            ], "finalizers": ["f2"], "args": ["y"]}})
        );
        let replace = br#"{"spec": {"$patch": "replace", "replicas": 1}}"#;
        assert_eq!(
            apply(PatchType::Strategic, &doc, replace).unwrap(),
            json!({"spec": {"replicas": 1}})
        );
        let retain = br#"{"spec": {"$retainKeys": ["args"], "args": ["z"]}}"#;
        assert_eq!(
            apply(PatchType::Strategic, &doc, retain).unwrap(),
            json!({"spec": {"args": ["z"]}})
        );
        for bad in [
            &br#"{"spec": {"$patch": "frob"}}"#[..],
            br#"{"spec": {"containers": [{"image": "nameless"}]}}"#,
            br#"{"spec": {"$bogus": 1}}"#,
        ] {
            assert!(
                matches!(
                    apply(PatchType::Strategic, &doc, bad),
                    Err(PatchError::Failed(_))
                ),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn json_patch_follows_rfc_6902() {
        let doc = json!({"a": {"b": [1, 2]}, "c": "d"});
        let p = br#"[
            {"op": "test", "path": "/c", "value": "d"},
            {"op": "add", "path": "/a/b/1", "value": 9},
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "remove", "path": "/a/b/0"},
            {"op": "replace", "path": "/c", "value": "e"},
            {"op": "copy", "from": "/c", "path": "/f"},
            {"op": "move", "from": "/f", "path": "/a~1x"}
        ]"#;
        assert_eq!(
            apply(PatchType::Json, &doc, p).unwrap(),
            json!({"a": {"b": [9, 2, 3]}, "c": "e", "a/x": "e"})
        );
        for bad in [
            &br#"[{"op": "test", "path": "/c", "value": "x"}]"#[..],
            br#"[{"op": "remove", "path": "/nope"}]"#,
            br#"[{"op": "add", "path": "/a/b/7", "value": 1}]"#,
            br#"[{"op": "frobnicate", "path": "/c"}]"#,
            br#"{"op": "add"}"#,
        ] {
            assert!(
                apply(PatchType::Json, &doc, bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            PatchType::of("application/json-patch+json; charset=utf-8"),
            Some(PatchType::Json)
        );
        assert_eq!(PatchType::of("application/apply-patch+yaml"), None);
    }
}
