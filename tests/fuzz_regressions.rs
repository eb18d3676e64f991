//! Inputs the fuzz targets (`fuzz/`, see FUZZING.md) failed on, fed to the same decoder entry
//! points, with the behaviour expected since the fix.
//!
//! 1. JSON arrays where objects belong (`json_object`: "a metadata member that is not a JSON
//!    object was accepted"; `list_json`: "a list item that is not a JSON object was accepted").
//!    serde's derived structs also read a JSON array, field by field in declaration order, so
//!    `{"metadata":["x"]}` decoded as an object named `x`, a list item `[]` as an empty object,
//!    a watch line `["ADDED",{...}]` as an ADDED event and `[410]` as a 410 status. The API
//!    server's decoder (Go's `encoding/json`) rejects an array in place of a struct; ours now
//!    answers with `DecodeError::Json` too.
//! 2. An unterminated last watch line (`watch_json`: "raw bytes are not a slice of the input";
//!    later "not the stream's last value", when members followed `"object"`).
//!    Not a decoder bug: the line decoder copies the start of a line it finds incomplete out of
//!    the received chunks, so that no read buffer stays referenced while the rest is awaited,
//!    and the object decoded from that line at the end of the stream is a copy. The target
//!    expected a slice; it now expects the stream's own bytes, and this test pins both halves.
//! 3. A timestamp with a signed six-digit year (`json_object`: "re-rendered document decodes").
//!    jiff reads ISO 8601's extended years, so `"-004999-01-01T00:00:00Z"` was accepted, then
//!    written back as `-4999-01-01T00:00:00Z`, which nothing reads. Go's RFC 3339 parser (the
//!    API server's) takes four-digit years only; ours now rejects the others too.

use bytes::Bytes;
use informer::object::{
    self, DEFAULT_FRAME_LIMIT, DecodeError, WatchDecoder, WatchEvent, WatchFormat,
};

fn json_error<T: std::fmt::Debug>(r: Result<T, DecodeError>) -> String {
    match r {
        Err(DecodeError::Json { message, .. }) => message,
        other => panic!("expected a JSON error, got {other:?}"),
    }
}

/// The event of the unterminated last line of what `d` was given: none before the stream
/// ends, one at its end.
fn unterminated_last_event(d: &mut WatchDecoder) -> WatchEvent {
    assert_eq!(d.next_event(), Ok(None));
    d.finish()
        .unwrap()
        .expect("the unterminated line is an event")
}

fn watch_json(stream: &'static [u8]) -> Result<Option<WatchEvent>, DecodeError> {
    let mut d = WatchDecoder::new(WatchFormat::Json, DEFAULT_FRAME_LIMIT);
    d.push(Bytes::from_static(stream));
    d.next_event()
}

#[test]
fn metadata_given_as_an_array_is_rejected() {
    // The fuzzer's input: before the fix this decoded as an object named "x".
    let msg = json_error(object::decode(Bytes::from_static(br#"{"metadata":["x"]}"#)));
    assert!(msg.contains("expected a JSON object"), "{msg}");
    // The same document with an object decodes, and null still means "no metadata".
    let o = object::decode(Bytes::from_static(br#"{"metadata":{"name":"x"}}"#)).unwrap();
    assert_eq!(o.name(), "x");
    let o = object::decode(Bytes::from_static(br#"{"kind":"Pod","metadata":null}"#)).unwrap();
    assert_eq!(o.name(), "");
    assert_eq!(o.gvk().kind, "Pod");
}

#[test]
fn owner_reference_given_as_an_array_is_rejected() {
    json_error(object::decode(Bytes::from_static(
        br#"{"metadata":{"name":"a","ownerReferences":[["v1","ReplicaSet","rs","u1"]]}}"#,
    )));
    let o = object::decode(Bytes::from_static(
        br#"{"metadata":{"name":"a","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u1","controller":true}]}}"#,
    ))
    .unwrap();
    let r = &o.meta().owner_references().next().unwrap();
    assert_eq!((r.kind, r.name), ("ReplicaSet", "rs"));
    assert_eq!(r.controller, Some(true));
}

#[test]
fn list_item_given_as_an_array_is_rejected() {
    // The fuzzer's input shape: before the fix the item `[]` became an empty JSON object.
    json_error(object::decode_list(Bytes::from_static(
        br#"{"kind":"PodList","apiVersion":"v1","items":[[]]}"#,
    )));
    json_error(object::decode_list(Bytes::from_static(
        br#"{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"a"}},["b"]]}"#,
    )));
    let l = object::decode_list(Bytes::from_static(
        br#"{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"a"}}]}"#,
    ))
    .unwrap();
    assert_eq!(l.items.len(), 1);
    assert_eq!(l.items[0].name(), "a");
    assert_eq!(l.items[0].gvk().kind, "Pod");
}

#[test]
fn list_or_list_metadata_given_as_an_array_is_rejected() {
    // The whole list as an array: apiVersion, kind, metadata, items by position.
    json_error(object::decode_list(Bytes::from_static(
        br#"["v1","PodList",null,[{"metadata":{"name":"a"}}]]"#,
    )));
    json_error(object::decode_list(Bytes::from_static(
        br#"{"kind":"PodList","apiVersion":"v1","metadata":["","42"],"items":[]}"#,
    )));
    let l = object::decode_list(Bytes::from_static(
        br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[]}"#,
    ))
    .unwrap();
    assert_eq!(l.resource_version, "42");
}

#[test]
fn watch_line_or_status_given_as_an_array_is_rejected() {
    // Before the fix: an ADDED event for Pod "a".
    json_error(watch_json(
        b"[\"ADDED\",{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"}}]\n",
    ));
    // Before the fix: an ERROR event with code 410.
    json_error(watch_json(b"{\"type\":\"ERROR\",\"object\":[410]}\n"));
    json_error(watch_json(
        b"{\"type\":\"ERROR\",\"object\":{\"code\":429,\"details\":[[],5]}}\n",
    ));
    json_error(watch_json(
        b"{\"type\":\"ERROR\",\"object\":{\"code\":500,\"details\":{\"causes\":[[\"x\"]]}}}\n",
    ));
    // The object forms still decode.
    match watch_json(
        b"{\"type\":\"ERROR\",\"object\":{\"code\":410,\"reason\":\"Expired\",\"details\":{\"causes\":[{\"reason\":\"x\"}],\"retryAfterSeconds\":3}}}\n",
    ) {
        Ok(Some(WatchEvent::Error(s))) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
            assert_eq!(s.cause_reasons, ["x"]);
            assert_eq!(s.retry_after_seconds, Some(3));
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    match watch_json(
        b"{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"}}}\n",
    ) {
        Ok(Some(WatchEvent::Added(o))) => assert_eq!(o.name(), "a"),
        other => panic!("expected an ADDED event, got {other:?}"),
    }
}

#[test]
fn unterminated_last_watch_line_is_decoded_from_a_copy_of_its_bytes() {
    // The fuzzer's stream: a complete ADDED line, then a MODIFIED line with no `\n`.
    const STREAM: &[u8] = b"{\"type\":\"ADDED\",\"object\":{\"kind\":\"ServiceProxyOptions\",\"apiVersion\":\"v1\",\"path\":\"pathValue\"}}\n{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{\"surceVersion\":\"12345\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}";
    let mut d = WatchDecoder::new(WatchFormat::Json, DEFAULT_FRAME_LIMIT).with_compaction(0);
    d.push(Bytes::from_static(STREAM));
    let first = d.next_event().unwrap().expect("the complete line");
    let raw = first.object().unwrap().raw().unwrap();
    let at = raw.as_ptr() as usize - STREAM.as_ptr() as usize;
    assert!(
        at + raw.len() <= STREAM.len(),
        "a complete line's object is a slice"
    );
    assert_eq!(&STREAM[at..at + raw.len()], &raw[..]);

    // The last line is incomplete until the stream ends: no event, and its bytes copied out.
    let last = unterminated_last_event(&mut d);
    let o = last.object().unwrap();
    assert_eq!(o.gvk().kind, "Status");
    assert_eq!(
        o.meta().annotations().get("k8s.io/initial-events-end"),
        Some("true")
    );
    let raw = o.raw().unwrap();
    let tail = &STREAM[STREAM.len() - raw.len() - 1..STREAM.len() - 1];
    assert_eq!(
        &raw[..],
        tail,
        "the object's bytes are the stream's last value"
    );
    let p = raw.as_ptr() as usize;
    let s = STREAM.as_ptr() as usize;
    assert!(
        p + raw.len() <= s || p >= s + STREAM.len(),
        "copied, not sliced"
    );
}

#[test]
fn members_after_the_object_of_an_unterminated_last_line_are_ignored() {
    // The fuzzer's last line (`watch_json`: "not the stream's last value"): unknown members
    // follow `"object"`; the object is decoded from its own bytes, the rest ignored.
    const STREAM: &[u8] = b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"}},\"status\":\"statusValue\",\"details\":{\"name\":\"n\"}}";
    let mut d = WatchDecoder::new(WatchFormat::Json, DEFAULT_FRAME_LIMIT).with_compaction(0);
    d.push(Bytes::from_static(STREAM));
    let last = unterminated_last_event(&mut d);
    let o = last.object().unwrap();
    assert_eq!(o.meta().name(), "a");
    assert_eq!(
        &o.raw().unwrap()[..],
        &br#"{"kind":"Status","apiVersion":"v1","metadata":{"name":"a"}}"#[..]
    );
}

#[test]
fn timestamps_outside_rfc3339_years_are_rejected_and_the_others_round_trip() {
    // The fuzzer's input.
    let msg = json_error(object::decode(Bytes::from_static(
        b"{\n  \"kind\": \"TRevi*/61\",\n  \"metadata\": {\n       \"deletionTimestamp\": \"-004999-01-01T00:00:00Z\"\n  }\n}",
    )));
    assert!(msg.contains("outside 0000-9999"), "{msg}");
    for bad in ["+010000-01-01T00:00:00Z", "-000001-12-31T23:59:59Z"] {
        let doc = format!(r#"{{"metadata":{{"creationTimestamp":"{bad}"}}}}"#);
        json_error(object::decode(Bytes::from(doc)));
    }
    // jiff's timestamps end a day before RFC 3339's (9999-12-30T22:00:00Z): the last day of
    // year 9999 is refused too, where Go reads it.
    for good in [
        "0000-01-01T00:00:00Z",
        "0005-06-07T08:09:10Z",
        "9999-12-30T00:00:00Z",
    ] {
        let doc = format!(r#"{{"metadata":{{"creationTimestamp":"{good}"}}}}"#);
        let obj = object::decode(Bytes::from(doc)).unwrap();
        let t = obj.meta().creation_timestamp().unwrap();
        assert_eq!(t.to_rfc3339(), good);
        let again = obj.with_meta(obj.meta().clone()).unwrap();
        let back = object::decode(again.to_wire().unwrap()).unwrap();
        assert_eq!(back.meta().creation_timestamp(), Some(t), "{good}");
    }
}
