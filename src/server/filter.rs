//! What the HTTP layer narrows a request to before handing it to the simulator: the namespace
//! of a namespaced path and the field selectors every resource supports
//! (`metadata.name`, `metadata.namespace`). Both are fixed for an object's lifetime, so a
//! filtered watch never needs to turn a MODIFIED into an ADDED or DELETED. Upstream:
//! `apimachinery/pkg/fields/selector.go` (syntax), `apiserver/pkg/registry/generic`
//! (`DefaultClusterScopedAttr`, `DefaultNamespaceScopedAttr`).

use crate::object::{ApiStatus, Object};
use crate::sim::status::bad_request;

/// One `field=value` / `field!=value` term.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    name_field: bool,
    equal: bool,
    value: String,
}

/// A namespace and field-selector filter; empty = everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    namespace: Option<String>,
    terms: Vec<Term>,
}

impl Filter {
    /// The filter of a request to `namespace` (if any) with `field_selector` (if any).
    ///
    /// # Errors
    /// A 400 `Status` for a malformed selector or a field other than `metadata.name` and
    /// `metadata.namespace` (the wording is upstream's).
    pub(crate) fn new(
        namespace: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, ApiStatus> {
        let mut f = Filter {
            namespace: namespace.filter(|n| !n.is_empty()).map(str::to_owned),
            terms: Vec::new(),
        };
        for term in field_selector.unwrap_or("").split(',').map(str::trim) {
            if term.is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, true, v)
            } else {
                return Err(bad_request(format!(
                    "invalid field selector: {term:?}: does not contain one of '=', '==', '!='"
                )));
            };
            let name_field = match field.trim() {
                "metadata.name" => true,
                "metadata.namespace" => false,
                other => {
                    return Err(bad_request(format!("field label not supported: {other}")));
                }
            };
            f.terms.push(Term {
                name_field,
                equal,
                value: value.trim().to_owned(),
            });
        }
        Ok(f)
    }

    /// True when nothing is filtered out.
    pub(crate) fn is_empty(&self) -> bool {
        self.namespace.is_none() && self.terms.is_empty()
    }

    /// Whether `obj` passes.
    pub(crate) fn matches(&self, obj: &Object) -> bool {
        if self
            .namespace
            .as_deref()
            .is_some_and(|ns| ns != obj.namespace())
        {
            return false;
        }
        self.terms.iter().all(|t| {
            let v = if t.name_field {
                obj.name()
            } else {
                obj.namespace()
            };
            (v == t.value) == t.equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects_like_upstream() {
        let f = Filter::new(Some("a"), Some("metadata.name!=x, metadata.namespace==a")).unwrap();
        assert!(!f.is_empty());
        assert_eq!(f.terms.len(), 2);
        assert!(Filter::new(None, Some("")).unwrap().is_empty());
        let e = Filter::new(None, Some("spec.nodeName=n1")).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
        assert_eq!(e.message, "field label not supported: spec.nodeName");
        assert!(Filter::new(None, Some("metadata.name")).is_err());
    }
}
