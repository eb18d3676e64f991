//! Ready-made transforms for [`Informer::set_transform`](super::Informer::set_transform) and
//! [`InformerConfig::transform`](super::InformerConfig::transform).

use std::sync::Arc;

use crate::object::Object;

/// Drops `metadata.managedFields` before an object is queued and cached, the initial list
/// included (controller-runtime `cache.TransformStripManagedFields`, which also keeps the
/// `last-applied-configuration` annotation). Server-side-apply bookkeeping is often half of a
/// small object's bytes and controllers that do not apply patches never read it. Objects
/// whose bytes cannot be re-encoded (never the case for decoded objects) are kept whole.
///
/// # Examples
/// ```
/// use informer::{Informer, InformerConfig, strip_managed_fields};
/// # use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
/// # let sim = SimServer::new(SimConfig::new(Templates::etcd_pod(&default_fixtures_dir().unwrap()).unwrap())).unwrap();
/// let informer = Informer::new(sim, InformerConfig::default());
/// informer.set_transform(strip_managed_fields).unwrap();
/// ```
pub fn strip_managed_fields(obj: Arc<Object>) -> Arc<Object> {
    if obj.meta().managed_fields().is_empty() {
        return obj;
    }
    match obj.without_managed_fields() {
        Ok(stripped) => Arc::new(stripped),
        Err(_) => obj,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectMetaFields;
    use crate::object::{ObjectMeta, decode};

    fn fixture(path: &str) -> Arc<Object> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/fixtures")
            .join(path);
        Arc::new(decode(std::fs::read(p).unwrap().into()).unwrap())
    }

    #[test]
    fn managed_fields_go_and_everything_else_stays() {
        for path in [
            "k8s-testdata/HEAD/core.v1.Pod.pb",
            "k8s-testdata/HEAD/core.v1.Pod.json",
        ] {
            let obj = fixture(path);
            assert!(
                !obj.meta().managed_fields().is_empty(),
                "{path} has managed fields"
            );
            let stripped = strip_managed_fields(obj.clone());
            assert!(stripped.meta().managed_fields().is_empty(), "{path}");
            assert!(stripped.raw_len() < obj.raw_len(), "{path}");
            let expected = ObjectMeta::from(ObjectMetaFields {
                managed_fields: Vec::new(),
                ..obj.meta().to_fields()
            });
            assert_eq!(
                stripped.meta(),
                &expected,
                "{path}: the rest of metadata kept"
            );
            // Nothing left to strip: the same object back, no copy.
            assert!(Arc::ptr_eq(
                &strip_managed_fields(stripped.clone()),
                &stripped
            ));
        }
    }
}
