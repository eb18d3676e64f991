//! [`ClientOptions`]: where the `kube::Client` under an [`super::HttpListerWatcher`] comes from
//! (a kubeconfig file, the in-cluster service account, or a bare server URL).

use std::path::PathBuf;

use kube::config::{InferConfigError, KubeConfigOptions, Kubeconfig, KubeconfigError};

use super::http::chain;

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file could not be read or used.
    #[error("kubeconfig: {}", chain(.0))]
    Kubeconfig(#[source] KubeconfigError),
    /// Neither `$KUBECONFIG`/`~/.kube/config` nor the in-cluster environment gave a config.
    #[error("no kubeconfig and not in a cluster: {}", chain(.0))]
    Infer(#[source] InferConfigError),
    /// `--server` is not a URL.
    #[error("server URL {url:?}: {message}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// Why it does not parse.
        message: String,
    },
    /// The HTTP client could not be built (TLS setup, auth plugin configuration).
    #[error("building the client: {}", chain(.0))]
    Client(#[source] kube::Error),
}

/// Where to find the cluster and credentials, as `kubectl` takes them.
///
/// - `kubeconfig` set: that file (with `context`, or its current context);
/// - else `server` set alone: that URL with no credentials (a local `informer serve`, a
///   `kubectl proxy`);
/// - else `kube`'s inference: `$KUBECONFIG` or `~/.kube/config`, then the in-cluster service
///   account (token file, CA, `KUBERNETES_SERVICE_HOST`).
///
/// `server` with a kubeconfig replaces the kubeconfig's cluster URL (credentials kept). Exec
/// plugins, client certificates, bearer tokens and TLS settings are all `kube`'s.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientOptions {
    /// A kubeconfig file.
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig; `None` = its current context.
    pub context: Option<String>,
    /// The API server's URL, e.g. `http://127.0.0.1:8001`.
    pub server: Option<String>,
}

impl ClientOptions {
    /// The `kube` configuration these options name, with `kube`'s own retry layer turned off
    /// (the reflector sees every 429/5xx and owns backoff, as client-go's reflector does).
    ///
    /// # Errors
    /// [`ClientError::Kubeconfig`], [`ClientError::Infer`], [`ClientError::BadUrl`].
    pub async fn config(&self) -> Result<kube::Config, ClientError> {
        let server = match &self.server {
            Some(url) => Some(url.parse::<http::Uri>().map_err(|e| ClientError::BadUrl {
                url: url.clone(),
                message: e.to_string(),
            })?),
            None => None,
        };
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..Default::default()
        };
        let mut config = match (&self.kubeconfig, &server) {
            (Some(path), _) => {
                let kc = Kubeconfig::read_from(path).map_err(ClientError::Kubeconfig)?;
                kube::Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(ClientError::Kubeconfig)?
            }
            (None, Some(url)) => kube::Config::new(url.clone()),
            (None, None) if self.context.is_some() => kube::Config::from_kubeconfig(&options)
                .await
                .map_err(ClientError::Kubeconfig)?,
            (None, None) => kube::Config::infer().await.map_err(ClientError::Infer)?,
        };
        if let Some(url) = server {
            config.cluster_url = url;
        }
        config.default_retry = false;
        Ok(config)
    }

    /// A `kube::Client` for [`ClientOptions::config`]. Must be called inside a tokio runtime
    /// (the client's connection pool runs on it).
    ///
    /// # Errors
    /// As [`ClientOptions::config`], and [`ClientError::Client`].
    pub async fn client(&self) -> Result<kube::Client, ClientError> {
        let config = self.config().await?;
        kube::Client::try_from(config).map_err(ClientError::Client)
    }
}
