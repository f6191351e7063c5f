//! The web configuration as the server applies it: the file parsed
//! (config.rs), then every file it names read and checked (tls.rs).

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use hyper::header::{HeaderName, HeaderValue};

use super::{config, tls};

/// A loaded web configuration: every file it names read and checked.
#[derive(Default)]
pub struct WebConfig {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub users: std::collections::BTreeMap<String, String>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// Reads `path` and everything it names; an error names the file and the
/// field at fault.
pub fn load(path: &Path) -> Result<WebConfig> {
    let at = |e: anyhow::Error| anyhow!("--web.config.file {}: {e:#}", path.display());
    let text = std::fs::read_to_string(path)
        .context("cannot read it")
        .map_err(at)?;
    let spec = config::parse_web_config(&text).map_err(|e| at(anyhow!(e)))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tls = spec
        .tls
        .as_ref()
        .map(|t| tls::server_config(t, dir))
        .transpose()
        .map_err(at)?;
    let headers = spec
        .headers
        .iter()
        .map(|(n, v)| {
            Ok((
                HeaderName::from_bytes(n.as_bytes())?,
                HeaderValue::from_str(v)?,
            ))
        })
        .collect::<Result<Vec<_>>>()
        .map_err(at)?;
    if tls.is_none() && !spec.users.is_empty() {
        crate::say!(
            "iowarden: warning: {}: basic_auth_users without tls_server_config: passwords cross the network in clear",
            path.display()
        );
    }
    Ok(WebConfig {
        tls,
        users: spec.users,
        headers,
    })
}
