//! Errors of the simulator's own API (building it, mutating objects). Request errors seen by a
//! client are [`crate::reflector::ApiError`]s, as from a real server.

use std::path::PathBuf;

use crate::object::{DecodeError, ObjectKey};

/// What went wrong building a simulator or changing its objects.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A template file could not be read.
    #[error("reading template {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A template file did not decode as a Kubernetes object.
    #[error("decoding template {}: {source}", .path.display())]
    Template {
        /// The file.
        path: PathBuf,
        /// The decode error.
        #[source]
        source: DecodeError,
    },
    /// A template has no kind or version (e.g. a JSON dump without `apiVersion`/`kind`; see
    /// [`super::Templates::from_files_with_kind`]).
    #[error("template {0} has no apiVersion/kind")]
    NoKind(ObjectKey),
    /// No template was given.
    #[error("no object templates")]
    NoTemplates,
    /// Templates must share one kind and one encoding (the simulator serves one resource).
    #[error("templates mix kinds or encodings: {first} and {other}")]
    MixedTemplates {
        /// The first template's kind and encoding.
        first: String,
        /// The offending template's kind and encoding.
        other: String,
    },
    /// No fixtures directory was found (see [`super::default_fixtures_dir`]).
    #[error("fixtures directory not found; tried {tried:?} (set INFORMER_FIXTURES)")]
    FixturesNotFound {
        /// The directories looked at.
        tried: Vec<PathBuf>,
    },
    /// `create` of a key that exists.
    #[error("{0} already exists")]
    AlreadyExists(ObjectKey),
    /// `update` or `delete` of a key that does not exist.
    #[error("{0} not found")]
    NotFound(ObjectKey),
    /// Varied objects ([`super::SimConfig::vary`]) were asked of templates that are not Pods.
    #[error("varied objects need Pod templates, not {0}")]
    NotPods(String),
    /// Re-encoding an object failed (never happens for templates that decoded).
    #[error("encoding an object: {0}")]
    Encode(#[from] DecodeError),
}
