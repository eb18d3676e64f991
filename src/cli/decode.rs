//! `informer decode FILE...`: prints the group/version/kind and metadata of every object in
//! protobuf (`k8s\0` envelope or bare message), JSON (object, list, array of objects), etcd
//! (`storage__*.bin` with a stray trailing byte, boltdb `mvccpb.KeyValue` items) and
//! watch-stream captures (protobuf frames or JSON lines).

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use informer::object::{
    self, ApiStatus, DEFAULT_FRAME_LIMIT, GroupVersionKind, MAGIC, Object, WatchDecoder,
    WatchEvent, WatchFormat,
};
use prost::Message;
use serde_json::{Value, json};

/// Arguments of `informer decode`.
#[derive(Debug, clap::Args)]
pub(crate) struct DecodeArgs {
    /// Files to decode.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print JSON (one array of blocks) instead of text.
    #[arg(long)]
    json: bool,
}

/// One decoded thing: an object (with the watch event type when it came from a stream) or an
/// API status.
enum Item {
    Object {
        event: Option<&'static str>,
        obj: Box<Object>,
        note: Option<String>,
    },
    Status(ApiStatus),
    /// A valid envelope whose message has no `ObjectMeta` in field 1 (options, reviews,
    /// discovery documents...): only its kind and size are known.
    Other {
        gvk: GroupVersionKind,
        bytes: usize,
        why: String,
    },
}

fn obj(obj: Object) -> Item {
    Item::Object {
        event: None,
        obj: Box::new(obj),
        note: None,
    }
}

fn from_events(input: Bytes, format: WatchFormat) -> Result<Vec<Item>, String> {
    let mut d = WatchDecoder::new(format, DEFAULT_FRAME_LIMIT);
    d.push(input);
    let mut out = Vec::new();
    let mut push = |ev: WatchEvent| {
        let event = Some(ev.event_type().as_str());
        match ev {
            WatchEvent::Error(s) => out.push(Item::Status(s)),
            WatchEvent::Added(o)
            | WatchEvent::Modified(o)
            | WatchEvent::Deleted(o)
            | WatchEvent::Bookmark(o) => out.push(Item::Object {
                event,
                obj: Box::new(o),
                note: None,
            }),
        }
    };
    loop {
        match d.next_event() {
            Ok(Some(ev)) => push(ev),
            Ok(None) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    if let Some(ev) = d.finish().map_err(|e| e.to_string())? {
        push(ev);
    }
    Ok(out)
}

fn decode_protobuf(input: Bytes) -> Result<Vec<Item>, String> {
    let env = object::decode_envelope(&input).map_err(|e| e.to_string())?;
    if env.gvk.kind.ends_with("List") {
        let list = object::decode_list(input).map_err(|e| e.to_string())?;
        return Ok(list.items.into_iter().map(obj).collect());
    }
    if env.gvk.kind == "Status" {
        return Ok(vec![Item::Status(
            ApiStatus::decode(&input).map_err(|e| e.to_string())?,
        )]);
    }
    if env.gvk.kind == "WatchEvent" || env.gvk.kind.is_empty() {
        // One WatchEvent in an envelope (upstream writes it with an empty TypeMeta): frame it
        // as a stream would. With no kind, it may also be any object: try both.
        let mut frame = (env.raw.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&env.raw);
        let as_event = from_events(Bytes::from(frame), WatchFormat::Protobuf);
        if as_event.is_ok() {
            return as_event;
        }
        let why = as_event.err().unwrap_or_default();
        return Ok(vec![object::decode(input).map_or_else(
            |e| {
                other(
                    &env,
                    format!("neither a WatchEvent ({why}) nor an object ({e})"),
                )
            },
            obj,
        )]);
    }
    // Kinds without ObjectMeta in field 1 (GetOptions, AdmissionReview, APIGroup...) are valid
    // envelopes too: report their kind instead of a metadata error.
    Ok(vec![object::decode(input).map_or_else(
        |e| other(&env, format!("field 1 is not ObjectMeta ({e})")),
        obj,
    )])
}

fn other(env: &object::Envelope, why: String) -> Item {
    Item::Other {
        gvk: env.gvk.clone(),
        bytes: env.raw.len(),
        why,
    }
}

fn decode_json(input: Bytes) -> Result<Vec<Item>, String> {
    let first = input.iter().find(|b| !b.is_ascii_whitespace()).copied();
    if first == Some(b'[') {
        // An array of objects (e.g. recorded successive states).
        let docs: Vec<Box<serde_json::value::RawValue>> =
            serde_json::from_slice(&input).map_err(|e| e.to_string())?;
        return docs
            .into_iter()
            .map(|d| {
                object::decode(Bytes::from(d.get().to_owned()))
                    .map(obj)
                    .map_err(|e| e.to_string())
            })
            .collect();
    }
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(default)]
        kind: String,
        #[serde(rename = "type", default)]
        event_type: Option<String>,
        #[serde(default)]
        items: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        object: Option<serde::de::IgnoredAny>,
    }
    // A watch capture holds several documents: peek at the first line only.
    let first_line = input
        .split(|&b| b == b'\n')
        .find(|l| !l.trim_ascii().is_empty());
    if let Some(line) = first_line
        && let Ok(p) = serde_json::from_slice::<Peek>(line)
        && p.event_type.is_some()
        && p.object.is_some()
        && p.kind.is_empty()
    {
        return from_events(input, WatchFormat::Json);
    }
    let p: Peek = serde_json::from_slice(&input).map_err(|e| e.to_string())?;
    if p.items.is_some() || p.kind.ends_with("List") {
        let list = object::decode_list(input).map_err(|e| e.to_string())?;
        return Ok(list.items.into_iter().map(obj).collect());
    }
    if p.kind == "Status" {
        return Ok(vec![Item::Status(
            ApiStatus::decode(&input).map_err(|e| e.to_string())?,
        )]);
    }
    object::decode(input)
        .map(|o| vec![obj(o)])
        .map_err(|e| e.to_string())
}

/// Sets `note` on every object item.
fn with_note(items: Vec<Item>, note: &str) -> Vec<Item> {
    items
        .into_iter()
        .map(|i| match i {
            Item::Object { event, obj, .. } => Item::Object {
                event,
                obj,
                note: Some(note.to_owned()),
            },
            s => s,
        })
        .collect()
}

/// Tries the formats in turn; the first that decodes the whole input wins.
fn decode_any(input: Bytes) -> Result<Vec<Item>, String> {
    if input.starts_with(&MAGIC) {
        return match decode_protobuf(input.clone()) {
            // etcd's storage values written by some tools carry one stray trailing newline.
            Err(e) if input.ends_with(b"\n") => decode_protobuf(input.slice(..input.len() - 1))
                .map(|items| with_note(items, "stripped one trailing 0x0a byte"))
                .map_err(|_| e),
            r => r,
        };
    }
    if matches!(
        input.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    ) {
        return decode_json(input);
    }
    let mut errors = Vec::new();
    // etcd KeyValue whose value is an envelope.
    match informer::wire::etcd::KeyValue::decode(input.clone()) {
        Ok(kv) if kv.value.starts_with(&MAGIC) => {
            let key = String::from_utf8_lossy(&kv.key).into_owned();
            let note = format!("etcd key {key}, mod_revision {}", kv.mod_revision);
            return decode_protobuf(kv.value).map(|items| with_note(items, &note));
        }
        Ok(_) => errors.push("not an etcd KeyValue holding an envelope".to_owned()),
        Err(e) => errors.push(format!("etcd KeyValue: {e}")),
    }
    // A protobuf watch capture: 4-byte length + WatchEvent frames.
    match from_events(input.clone(), WatchFormat::Protobuf) {
        Ok(items) if !items.is_empty() => return Ok(items),
        Ok(_) => {}
        Err(e) => errors.push(format!("protobuf watch stream: {e}")),
    }
    // A bare object message (no envelope): metadata in field 1, kind unknown.
    let gvk = Arc::new(GroupVersionKind::default());
    match object::decode(object::encode_envelope(&gvk, &input)) {
        Ok(o) if !o.name().is_empty() => {
            return Ok(vec![Item::Object {
                event: None,
                obj: Box::new(o),
                note: Some("bare message without envelope: kind unknown".into()),
            }]);
        }
        Ok(_) => errors.push("bare message: no name in field 1".into()),
        Err(e) => errors.push(format!("bare message: {e}")),
    }
    Err(format!("no format fits: {}", errors.join("; ")))
}

fn item_json(file: &str, item: &Item) -> Value {
    match item {
        Item::Other { gvk, bytes, why } => json!({
            "file": file,
            "apiVersion": gvk.api_version(),
            "kind": gvk.kind,
            "bytes": bytes,
            "objectMeta": false,
            "note": why,
        }),
        Item::Status(s) => json!({
            "file": file,
            "status": {"code": s.code, "reason": s.reason, "message": s.message,
                       "causes": s.cause_reasons, "retryAfterSeconds": s.retry_after_seconds},
        }),
        Item::Object { event, obj, note } => {
            let m = obj.meta();
            json!({
                "file": file,
                "event": event,
                "note": note,
                "apiVersion": obj.gvk().api_version(),
                "kind": obj.gvk().kind,
                "encoding": format!("{:?}", obj.encoding()),
                "bytes": obj.raw_len(),
                "name": m.name(),
                "generateName": m.generate_name(),
                "namespace": m.namespace(),
                "uid": m.uid(),
                "resourceVersion": m.resource_version(),
                "generation": m.generation(),
                "creationTimestamp": m.creation_timestamp().map(|t| t.to_rfc3339()),
                "deletionTimestamp": m.deletion_timestamp().map(|t| t.to_rfc3339()),
                "deletionGracePeriodSeconds": m.deletion_grace_period_seconds(),
                "labels": m.labels(),
                "annotations": m.annotations(),
                "ownerReferences": m.owner_references().map(|o| json!({
                    "apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid,
                    "controller": o.controller, "blockOwnerDeletion": o.block_owner_deletion,
                })).collect::<Vec<_>>(),
                "finalizers": m.finalizers(),
                "managedFieldsEntries": m.managed_fields().len(),
            })
        }
    }
}

fn print_text(file: &str, item: &Item) {
    match item {
        Item::Other { gvk, bytes, why } => {
            if gvk.kind.is_empty() {
                println!("{file}: (kind unknown)");
            } else {
                println!("{file}: {} {}", gvk.api_version(), gvk.kind);
            }
            println!("  note:              no ObjectMeta: {why}");
            println!("  bytes:             {bytes} (Protobuf)");
        }
        Item::Status(s) => {
            println!("{file}: Status");
            println!("  code:     {}", s.code);
            println!("  reason:   {}", s.reason);
            println!("  message:  {}", s.message);
            if !s.cause_reasons.is_empty() {
                println!("  causes:   {}", s.cause_reasons.join(", "));
            }
            if let Some(r) = s.retry_after_seconds {
                println!("  retryAfterSeconds: {r}");
            }
        }
        Item::Object { event, obj, note } => {
            let m = obj.meta();
            let gvk = obj.gvk();
            let kind = if gvk.kind.is_empty() {
                "(kind unknown)".to_owned()
            } else {
                format!("{} {}", gvk.api_version(), gvk.kind)
            };
            match event {
                Some(e) => println!("{file}: {e} {kind}"),
                None => println!("{file}: {kind}"),
            }
            if let Some(n) = note {
                println!("  note:              {n}");
            }
            println!("  name:              {}", m.name());
            if !m.generate_name().is_empty() {
                println!("  generateName:      {}", m.generate_name());
            }
            println!("  namespace:         {}", m.namespace());
            println!("  uid:               {}", m.uid());
            println!("  resourceVersion:   {}", m.resource_version());
            if let Some(g) = m.generation() {
                println!("  generation:        {g}");
            }
            if let Some(t) = &m.creation_timestamp() {
                println!("  creationTimestamp: {}", t.to_rfc3339());
            }
            if let Some(t) = &m.deletion_timestamp() {
                println!("  deletionTimestamp: {}", t.to_rfc3339());
            }
            if let Some(s) = m.deletion_grace_period_seconds() {
                println!("  deletionGracePeriodSeconds: {s}");
            }
            for (k, v) in &m.labels() {
                println!("  label:             {k}={v}");
            }
            for (k, v) in &m.annotations() {
                let v = if v.len() > 100 {
                    let cut = (0..=100)
                        .rev()
                        .find(|&i| v.is_char_boundary(i))
                        .unwrap_or(0);
                    format!("{}… ({} bytes)", &v[..cut], v.len())
                } else {
                    v.to_string()
                };
                println!("  annotation:        {k}={v}");
            }
            for o in m.owner_references() {
                println!(
                    "  ownerReference:    {} {} {} uid={}{}",
                    o.api_version,
                    o.kind,
                    o.name,
                    o.uid,
                    if o.controller == Some(true) {
                        " (controller)"
                    } else {
                        ""
                    }
                );
            }
            for f in m.finalizers() {
                println!("  finalizer:         {f}");
            }
            if !m.managed_fields().is_empty() {
                println!(
                    "  managedFields:     {} entries (kept raw)",
                    m.managed_fields().len()
                );
            }
            println!(
                "  bytes:             {} ({:?})",
                obj.raw_len(),
                obj.encoding()
            );
        }
    }
    println!();
}

/// Runs the command; returns the process exit code (1 if any file failed).
pub(crate) fn run(args: &DecodeArgs) -> i32 {
    let mut code = 0;
    let mut blocks = Vec::new();
    for path in &args.files {
        let name = path.display().to_string();
        let result = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|b| decode_any(Bytes::from(b)));
        match result {
            Ok(items) => {
                for item in &items {
                    if args.json {
                        blocks.push(item_json(&name, item));
                    } else {
                        print_text(&name, item);
                    }
                }
            }
            Err(e) => {
                code = 1;
                if args.json {
                    blocks.push(json!({"file": name, "error": e}));
                } else {
                    eprintln!("{name}: error: {e}");
                }
            }
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&Value::Array(blocks)).unwrap_or_default()
        );
    }
    code
}
