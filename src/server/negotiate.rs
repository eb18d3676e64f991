//! Content negotiation from the `Accept` header, as kube-apiserver does it
//! (`apiserver/pkg/endpoints/handlers/negotiation/negotiate.go`): media ranges in order of
//! preference (`q`), the first one the server can produce wins.

use crate::object::Encoding;

/// The encoding to answer in, or `None` when no acceptable media type can be produced (406).
///
/// - `application/vnd.kubernetes.protobuf` → protobuf, when the objects are protobuf;
/// - `application/json`, `application/*`, `*/*` or no header → JSON when the objects are JSON
///   or can be transcoded (`json_ok`), else protobuf for the wildcards;
/// - media ranges asking for a conversion (`as=Table`, `as=PartialObjectMetadata`,
///   `as=APIGroupDiscoveryList`) are skipped, so the plain type after them is used: kubectl's
///   `application/json;as=Table;v=v1;g=meta.k8s.io,...,application/json` gets a plain list,
///   which kubectl prints with its default columns;
/// - anything else (YAML, CBOR) is skipped; `q=0` ranges are ignored.
pub(crate) fn negotiate(
    accept: Option<&str>,
    objects: Encoding,
    json_ok: bool,
) -> Option<Encoding> {
    let json = (objects == Encoding::Json || json_ok).then_some(Encoding::Json);
    let wildcard = json.or(Some(objects));
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return wildcard;
    };
    let mut ranges: Vec<(f32, usize, &str, bool)> = Vec::new();
    for (i, range) in accept.split(',').enumerate() {
        let mut parts = range.split(';');
        let mime = parts.next().unwrap_or("").trim();
        let mut q = 1.0f32;
        let mut conversion = false;
        for p in parts {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            match k.trim() {
                "q" => q = v.trim().parse().unwrap_or(1.0),
                "as" => conversion = true,
                _ => {}
            }
        }
        if q > 0.0 {
            ranges.push((q, i, mime, conversion));
        }
    }
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, _, mime, conversion) in ranges {
        if conversion {
            continue;
        }
        let pick = match mime.to_ascii_lowercase().as_str() {
            "application/vnd.kubernetes.protobuf" => {
                (objects == Encoding::Protobuf).then_some(Encoding::Protobuf)
            }
            "application/json" => json,
            "application/*" | "*/*" => wildcard,
            _ => None,
        };
        if pick.is_some() {
            return pick;
        }
    }
    None
}

/// The encoding of a metadata-only answer, when the client's most preferred media range asks
/// for `as=PartialObjectMetadata` or `as=PartialObjectMetadataList` (`g=meta.k8s.io`,
/// `v=v1` or `v1beta1`) in protobuf or JSON, as client-go's metadata client does; `None` when a
/// plain type (or nothing producible) comes first. Both kinds are accepted on lists and
/// watches alike. Every object has a metadata-only form in either encoding.
pub(crate) fn partial_metadata(accept: Option<&str>) -> Option<Encoding> {
    match conversion(accept) {
        Some((Conversion::PartialMetadata, enc)) => Some(enc),
        _ => None,
    }
}

/// Whether the client's most preferred media range asks for a `Table` (`as=Table`,
/// `g=meta.k8s.io`, `v=v1` or `v1beta1`) in JSON, as kubectl's `get` does.
pub(crate) fn table(accept: Option<&str>) -> bool {
    matches!(
        conversion(accept),
        Some((Conversion::Table, Encoding::Json))
    )
}

/// A conversion a client asks of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conversion {
    PartialMetadata,
    Table,
}

/// The conversion of the client's most preferred media range that this server can produce,
/// with its encoding; `None` when a plain type (or nothing producible) comes first.
fn conversion(accept: Option<&str>) -> Option<(Conversion, Encoding)> {
    /// One media range: preference, position, type, and its `as`, `g` and `v` parameters.
    struct Range<'a> {
        q: f32,
        at: usize,
        mime: &'a str,
        conversion: Option<&'a str>,
        group: Option<&'a str>,
        version: Option<&'a str>,
    }
    let mut ranges: Vec<Range<'_>> = Vec::new();
    for (at, range) in accept?.split(',').enumerate() {
        let mut parts = range.split(';');
        let mut r = Range {
            q: 1.0,
            at,
            mime: parts.next().unwrap_or("").trim(),
            conversion: None,
            group: None,
            version: None,
        };
        for p in parts {
            let (k, val) = p.split_once('=').unwrap_or((p, ""));
            match k.trim() {
                "q" => r.q = val.trim().parse().unwrap_or(1.0),
                "as" => r.conversion = Some(val.trim()),
                "g" => r.group = Some(val.trim()),
                "v" => r.version = Some(val.trim()),
                _ => {}
            }
        }
        if r.q > 0.0 {
            ranges.push(r);
        }
    }
    ranges.sort_by(|a, b| b.q.total_cmp(&a.q).then(a.at.cmp(&b.at)));
    for r in ranges {
        let enc = match r.mime.to_ascii_lowercase().as_str() {
            "application/vnd.kubernetes.protobuf" => Some(Encoding::Protobuf),
            "application/json" => Some(Encoding::Json),
            _ => None,
        };
        let meta_group =
            r.group == Some("meta.k8s.io") && matches!(r.version, Some("v1" | "v1beta1"));
        let known = match r.conversion {
            Some("PartialObjectMetadata" | "PartialObjectMetadataList") if meta_group => {
                Some(Conversion::PartialMetadata)
            }
            Some("Table") if meta_group && enc == Some(Encoding::Json) => Some(Conversion::Table),
            _ => None,
        };
        match (r.conversion, known, enc) {
            (Some(_), Some(c), Some(enc)) => return Some((c, enc)),
            // Other conversions are skipped, as `negotiate` does.
            (Some(_), _, _) => {}
            (None, _, _) if enc.is_some() || matches!(r.mime, "*/*" | "application/*") => {
                return None;
            }
            (None, _, _) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn metadata_only_answers_follow_the_first_preference() {
        use Encoding::*;
        let client_go = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(partial_metadata(Some(client_go)), Some(Protobuf));
        let json = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(partial_metadata(Some(json)), Some(Json));
        assert_eq!(partial_metadata(Some(KUBECTL_TABLE)), None);
        assert!(table(Some(KUBECTL_TABLE)));
        assert!(!table(Some("application/json")));
        assert!(!table(Some(
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json"
        )));
        assert_eq!(partial_metadata(Some("application/json")), None);
        assert_eq!(partial_metadata(None), None);
        let wrong_group = "application/json;as=PartialObjectMetadata;g=example.com;v=v1";
        assert_eq!(partial_metadata(Some(wrong_group)), None);
        let plain_first =
            "application/json,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(partial_metadata(Some(plain_first)), None);
    }

    #[test]
    fn picks_like_the_api_server() {
        use Encoding::*;
        let pb = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(negotiate(Some(pb), Protobuf, true), Some(Protobuf));
        assert_eq!(negotiate(Some(pb), Json, false), Some(Json));
        assert_eq!(negotiate(Some(KUBECTL_TABLE), Protobuf, true), Some(Json));
        assert_eq!(negotiate(Some(KUBECTL_TABLE), Protobuf, false), None);
        assert_eq!(negotiate(None, Protobuf, true), Some(Json));
        assert_eq!(negotiate(Some("*/*"), Protobuf, false), Some(Protobuf));
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf"), Json, true),
            None
        );
        assert_eq!(
            negotiate(
                Some("application/json;q=0.5, application/vnd.kubernetes.protobuf"),
                Protobuf,
                true
            ),
            Some(Protobuf)
        );
        assert_eq!(negotiate(Some("application/yaml"), Json, true), None);
    }
}
