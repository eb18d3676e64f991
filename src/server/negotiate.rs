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

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

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
