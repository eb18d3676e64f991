//! [`AppRests`]: the fields but metadata of the simulator's Deployments, one per template and
//! app.

use std::collections::HashMap;

use bytes::Bytes;

use super::SimError;
use super::config::SimConfig;
use super::rest::Rest;
use super::variants::for_app;

/// The fields but metadata of the simulator's Deployments, per template and app (each
/// Deployment `app-N` selects the Pods of `app-N`), made on first use.
#[derive(Debug, Default)]
pub(crate) struct AppRests(HashMap<(usize, u32), Bytes>);

impl AppRests {
    /// The fields but metadata of template `template` for the Deployment of app `app`.
    ///
    /// # Errors
    /// When the template does not decode as a Deployment.
    pub(crate) fn rest(
        &mut self,
        cfg: &SimConfig,
        template: usize,
        app: u32,
    ) -> Result<Bytes, SimError> {
        if let Some(r) = self.0.get(&(template, app)) {
            return Ok(r.clone());
        }
        let obj = for_app(&cfg.templates.objects()[template], &format!("app-{app}"))?;
        let rest = Rest::of(&obj)?.encode()?;
        self.0.insert((template, app), rest.clone());
        Ok(rest)
    }
}
