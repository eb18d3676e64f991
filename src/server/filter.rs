//! What the HTTP layer narrows a request to before handing it to the simulator: the namespace
//! of a namespaced path, a `labelSelector` ([`crate::object::LabelSelector`]) and a `fieldSelector` over the
//! fields the resource supports ([`Field`]). Upstream: `apimachinery/pkg/fields/selector.go`
//! (field selector syntax), `apiserver/pkg/storage/selection_predicate.go` (how both apply).

use super::discovery::ServedResource;
use super::fields::{Field, FieldValues};
use crate::object::{ApiStatus, LabelSelector, Object};
use crate::sim::status::bad_request;

/// One `field=value` / `field!=value` term.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    field: Field,
    equal: bool,
    value: String,
}

/// A namespace, label-selector and field-selector filter; empty = everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    namespace: Option<String>,
    labels: LabelSelector,
    terms: Vec<Term>,
    /// The kind fields the terms name (decoded once per object).
    kind_fields: Vec<&'static str>,
}

/// Splits `s` at unescaped `sep` (a backslash escapes the next character).
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut escaped = false;
    for c in s.chars() {
        if c == sep && !escaped {
            out.push(String::new());
            continue;
        }
        escaped = !escaped && c == '\\';
        if let Some(t) = out.last_mut() {
            t.push(c);
        }
    }
    out
}

/// Removes the escapes of a field selector value.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut escaped = false;
    for c in s.chars() {
        if escaped || c != '\\' {
            out.push(c);
            escaped = false;
        } else {
            escaped = true;
        }
    }
    out
}

/// The first unescaped occurrence of `op` in `term`.
fn find_op(term: &str, op: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in term.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
            continue;
        }
        if term[i..].starts_with(op) {
            return Some(i);
        }
    }
    None
}

impl Filter {
    /// The filter of a request for `resource` in `namespace` (if any) with `field_selector`
    /// and `label_selector` (if any).
    ///
    /// # Errors
    /// A 400 `Status` for a malformed selector or a field the resource does not support
    /// (`field label not supported: spec.foo`, upstream's wording).
    pub(crate) fn new(
        resource: &ServedResource,
        namespace: Option<&str>,
        field_selector: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Self, ApiStatus> {
        let labels: LabelSelector = label_selector
            .unwrap_or("")
            .parse()
            .map_err(|e: crate::object::SelectorError| bad_request(e.to_string()))?;
        let mut f = Filter {
            namespace: namespace.filter(|n| !n.is_empty()).map(str::to_owned),
            labels,
            terms: Vec::new(),
            kind_fields: Vec::new(),
        };
        for term in split_unescaped(field_selector.unwrap_or(""), ',') {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (at, len, equal) = if let Some(i) = find_op(term, "!=") {
                (i, 2, false)
            } else if let Some(i) = find_op(term, "==") {
                (i, 2, true)
            } else if let Some(i) = find_op(term, "=") {
                (i, 1, true)
            } else {
                return Err(bad_request(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                )));
            };
            let name = term[..at].trim();
            let value = unescape(term[at + len..].trim());
            let Some(field) = Field::of(resource, name) else {
                return Err(bad_request(format!("field label not supported: {name}")));
            };
            if let Field::Kind(k) = field
                && !f.kind_fields.contains(&k)
            {
                f.kind_fields.push(k);
            }
            f.terms.push(Term {
                field,
                equal,
                value,
            });
        }
        Ok(f)
    }

    /// True when nothing is filtered out.
    pub(crate) fn is_empty(&self) -> bool {
        self.namespace.is_none() && self.terms.is_empty() && self.labels.is_empty()
    }

    /// Whether an object can enter or leave the selection during its life (a label or a
    /// kind field is selected on): a watch must then turn changes into ADDED and DELETED
    /// events as upstream's watch cache does.
    pub(crate) fn tracks_membership(&self) -> bool {
        !self.labels.is_empty() || self.terms.iter().any(|t| t.field.mutable())
    }

    /// Whether `obj` passes (an object whose fields do not decode does not).
    pub(crate) fn matches(&self, obj: &Object) -> bool {
        if self
            .namespace
            .as_deref()
            .is_some_and(|ns| ns != obj.namespace())
        {
            return false;
        }
        if !self.labels.matches(obj.meta().labels()) {
            return false;
        }
        let values = match FieldValues::of(obj, &self.kind_fields) {
            Ok(v) => v,
            Err(_) => return false,
        };
        self.terms.iter().all(|t| {
            let v = match &t.field {
                Field::Name => obj.name(),
                Field::Namespace => obj.namespace(),
                Field::Kind(k) => values.get(k),
            };
            (v == t.value) == t.equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods() -> ServedResource {
        ServedResource {
            group: String::new(),
            version: "v1".into(),
            singular: "pod".into(),
            kind: "Pod".into(),
            plural: "pods".into(),
            namespaced: true,
            short_names: vec![],
        }
    }

    #[test]
    fn parses_and_rejects_like_upstream() {
        let r = pods();
        let f = Filter::new(
            &r,
            Some("a"),
            Some("metadata.name!=x, metadata.namespace==a"),
            None,
        )
        .unwrap();
        assert!(!f.is_empty());
        assert!(!f.tracks_membership());
        assert_eq!(f.terms.len(), 2);
        assert!(
            Filter::new(&r, None, Some(""), Some(""))
                .unwrap()
                .is_empty()
        );
        let f = Filter::new(
            &r,
            None,
            Some("spec.nodeName=n1,status.phase!=Running"),
            None,
        )
        .unwrap();
        assert!(f.tracks_membership());
        assert_eq!(f.kind_fields, ["spec.nodeName", "status.phase"]);
        let e = Filter::new(&r, None, Some("spec.foo=n1"), None).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
        assert_eq!(e.message, "field label not supported: spec.foo");
        assert!(Filter::new(&r, None, Some("metadata.name"), None).is_err());
        assert!(Filter::new(&r, None, None, Some("app in web")).is_err());
        let deployments = ServedResource {
            group: "apps".into(),
            plural: "deployments".into(),
            kind: "Deployment".into(),
            ..pods()
        };
        let e = Filter::new(&deployments, None, Some("spec.nodeName=n1"), None).unwrap_err();
        assert_eq!(e.message, "field label not supported: spec.nodeName");
        let nodes = ServedResource {
            plural: "nodes".into(),
            namespaced: false,
            ..pods()
        };
        assert!(Filter::new(&nodes, None, Some("metadata.namespace=a"), None).is_err());
    }

    #[test]
    fn escaped_values_are_unescaped() {
        let f = Filter::new(
            &pods(),
            None,
            Some(r"metadata.name=a\,b,metadata.namespace=c\=d"),
            None,
        )
        .unwrap();
        assert_eq!(f.terms[0].value, "a,b");
        assert_eq!(f.terms[1].value, "c=d");
    }
}
