//! [`TypedLister`]: typed reads (`Arc<K>` for a k8s-pb kind, a k8s-openapi kind or a
//! `CustomResource` struct) decoded once per object version, the typed face of generated
//! listers (client-go `listers/apps/v1`, `DeploymentLister`).

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::lister::{Lister, NamespaceLister};
use crate::object::LabelSelector;
use crate::object::{DecodeError, Object, ObjectKey};
use crate::store::StoreError;

const SHARDS: usize = 16;

type Entry<K> = (Weak<Object>, Arc<K>);
type Shard<K> = Mutex<HashMap<ObjectKey, Entry<K>>>;
/// How a cached object becomes a `K`: prost for k8s-pb kinds, serde for the others.
type DecodeFn<K> = fn(&Object) -> Result<K, DecodeError>;

/// Typed values decoded from cached objects, keyed by object key and tied to the exact
/// object version (`Arc<Object>` identity) they came from: a read of an unchanged object hands
/// out the same `Arc<K>`; a new version is decoded once, by the first reader that asks.
struct DecodeCache<K> {
    shards: Box<[Shard<K>]>,
    hasher: foldhash::fast::RandomState,
    decodes: AtomicUsize,
    decode: DecodeFn<K>,
}

impl<K> DecodeCache<K> {
    fn new(decode: DecodeFn<K>) -> Self {
        DecodeCache {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: foldhash::fast::RandomState::default(),
            decodes: AtomicUsize::new(0),
            decode,
        }
    }

    fn shard(&self, key: &ObjectKey) -> &Shard<K> {
        &self.shards[(self.hasher.hash_one(key) as usize) % SHARDS]
    }

    fn get(&self, obj: &Arc<Object>, live: usize) -> Result<Arc<K>, DecodeError> {
        let key = obj.key();
        let shard = self.shard(&key);
        {
            let map = shard.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((w, typed)) = map.get(&key)
                && std::ptr::eq(w.as_ptr(), Arc::as_ptr(obj))
            {
                // A weak reference keeps its allocation from being reused: same pointer,
                // same object version.
                return Ok(typed.clone());
            }
        }
        // Decode outside the lock: other keys of the shard stay readable meanwhile.
        let typed = Arc::new((self.decode)(obj)?);
        self.decodes.fetch_add(1, Ordering::Relaxed);
        let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
        map.insert(key, (Arc::downgrade(obj), typed.clone()));
        // Entries of deleted objects: swept when the shard grows past twice its share.
        if map.len() > 2 * (live / SHARDS) + 64 {
            map.retain(|_, (w, _)| w.strong_count() > 0);
        }
        Ok(typed)
    }
}

/// Typed reads of an informer's objects: `Arc<K>`, decoded once per object version and shared
/// by every reader until the object changes. Cheap to clone (clones share the decoded values).
///
/// Two decoders: [`TypedLister::new`] for k8s-pb kinds (prost, from protobuf objects, e.g.
/// `k8s_pb::api::apps::v1::Deployment`), [`TypedLister::serde`] for serde kinds (k8s-openapi
/// kinds, `#[derive(CustomResource)]` structs, from JSON objects).
///
/// # Errors
/// Reads return [`DecodeError`] when an object does not decode as `K`: a JSON object read
/// through a prost lister ([`DecodeError::NotProtobuf`]), a protobuf object through a serde
/// lister ([`DecodeError::NotJson`]), or bytes of another shape.
///
/// # Examples
/// ```
/// use informer::{Lister, TypedLister};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// # let (store, _writer) = informer::store::store(Default::default());
/// let lister = Lister::new(store);
/// let config_maps: TypedLister<ConfigMap> = TypedLister::serde(lister);
/// assert!(config_maps.get("default", "settings").unwrap().is_none());
/// ```
pub struct TypedLister<K> {
    lister: Lister,
    cache: Arc<DecodeCache<K>>,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Clone for TypedLister<K> {
    fn clone(&self) -> Self {
        TypedLister {
            lister: self.lister.clone(),
            cache: self.cache.clone(),
            _kind: PhantomData,
        }
    }
}

impl<K> fmt::Debug for TypedLister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedLister")
            .field("kind", &std::any::type_name::<K>())
            .field("lister", &self.lister)
            .finish()
    }
}

impl<K: prost::Message + Default + Send + Sync + 'static> TypedLister<K> {
    /// A typed lister of a k8s-pb (prost) kind over `lister`'s store.
    pub fn new(lister: Lister) -> Self {
        Self::with_decoder(lister, |o| o.decode::<K>())
    }
}

impl<K: serde::de::DeserializeOwned + Send + Sync + 'static> TypedLister<K> {
    /// A typed lister of a serde kind (k8s-openapi, `CustomResource`) over `lister`'s store,
    /// for informers that ask the server for JSON.
    pub fn serde(lister: Lister) -> Self {
        Self::with_decoder(lister, Object::deserialize::<K>)
    }
}

impl<K: Send + Sync + 'static> TypedLister<K> {
    fn with_decoder(lister: Lister, decode: DecodeFn<K>) -> Self {
        TypedLister {
            lister,
            cache: Arc::new(DecodeCache::new(decode)),
            _kind: PhantomData,
        }
    }

    /// The typed value of one cached object (of any version), decoded at most once per
    /// version. What a handler calls on the objects of its notifications.
    ///
    /// # Errors
    /// [`DecodeError`] when it does not decode as `K`.
    pub fn typed(&self, obj: &Arc<Object>) -> Result<Arc<K>, DecodeError> {
        self.cache.get(obj, self.lister.store().len())
    }

    /// The untyped lister underneath.
    pub fn untyped(&self) -> &Lister {
        &self.lister
    }

    /// How many objects were decoded so far (each version of each object once).
    pub fn decodes(&self) -> usize {
        self.cache.decodes.load(Ordering::Relaxed)
    }

    fn all(&self, objs: Vec<Arc<Object>>) -> Result<Vec<Arc<K>>, DecodeError> {
        objs.iter().map(|o| self.typed(o)).collect()
    }

    /// The object under `key` (`namespace/name`, or `name` for cluster-scoped objects), typed:
    /// what a worker does with a key from its queue (client-go `GetByKey`).
    ///
    /// # Errors
    /// [`DecodeError`] when it does not decode as `K`.
    pub fn get_by_key(&self, key: &ObjectKey) -> Result<Option<Arc<K>>, DecodeError> {
        self.lister
            .store()
            .get(key)
            .map(|o| self.typed(&o))
            .transpose()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.lister.store().len()
    }

    /// `true` when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The object `namespace/name`, typed.
    ///
    /// # Errors
    /// [`DecodeError`] when it does not decode as `K`.
    pub fn get(&self, namespace: &str, name: &str) -> Result<Option<Arc<K>>, DecodeError> {
        self.lister
            .get(namespace, name)
            .map(|o| self.typed(&o))
            .transpose()
    }

    /// Every object, typed.
    ///
    /// # Errors
    /// [`DecodeError`] for the first object that does not decode as `K`.
    pub fn list(&self) -> Result<Vec<Arc<K>>, DecodeError> {
        self.all(self.lister.list())
    }

    /// Every object whose labels match `selector`, typed.
    ///
    /// # Errors
    /// As [`list`](Self::list).
    pub fn list_matching(&self, selector: &LabelSelector) -> Result<Vec<Arc<K>>, DecodeError> {
        self.all(self.lister.list_matching(selector))
    }

    /// The objects indexed under `value` in the index `index`, typed, read from one snapshot
    /// (client-go `GetIndexer().ByIndex` plus the type assertion of generated listers).
    ///
    /// # Errors
    /// [`TypedIndexError::Store`] for an unknown index; [`TypedIndexError::Decode`] for the
    /// first object that does not decode as `K`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, TypedIndexError> {
        let objs = self.lister.store().by_index(index, value)?;
        Ok(self.all(objs)?)
    }

    /// Typed reads of one namespace.
    pub fn namespace(&self, namespace: &str) -> TypedNamespaceLister<K> {
        TypedNamespaceLister {
            parent: self.clone(),
            lister: self.lister.namespace(namespace),
        }
    }
}

/// Why a typed index read ([`TypedLister::by_index`]) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TypedIndexError {
    /// The index does not exist.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An object indexed under the value does not decode as the lister's kind.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Typed reads of one namespace (client-go `DeploymentNamespaceLister`).
pub struct TypedNamespaceLister<K> {
    parent: TypedLister<K>,
    lister: NamespaceLister,
}

impl<K> fmt::Debug for TypedNamespaceLister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedNamespaceLister")
            .field("kind", &std::any::type_name::<K>())
            .field("namespace", &self.lister.namespace())
            .finish()
    }
}

impl<K: Send + Sync + 'static> TypedNamespaceLister<K> {
    /// The object `name` of this namespace, typed.
    ///
    /// # Errors
    /// [`DecodeError`] when it does not decode as `K`.
    pub fn get(&self, name: &str) -> Result<Option<Arc<K>>, DecodeError> {
        self.lister
            .get(name)
            .map(|o| self.parent.typed(&o))
            .transpose()
    }

    /// Every object of the namespace, typed.
    ///
    /// # Errors
    /// [`DecodeError`] for the first object that does not decode as `K`.
    pub fn list(&self) -> Result<Vec<Arc<K>>, DecodeError> {
        self.parent.all(self.lister.list())
    }

    /// Every object of the namespace whose labels match `selector`, typed.
    ///
    /// # Errors
    /// As [`list`](Self::list).
    pub fn list_matching(&self, selector: &LabelSelector) -> Result<Vec<Arc<K>>, DecodeError> {
        self.parent.all(self.lister.list_matching(selector))
    }
}
