//! The HTTP side of `iowarden run` and `tune`: the exporter-toolkit web
//! configuration (`--web.config.file`: TLS, basic auth, headers) and the
//! server that applies it with limits on what clients may send.

pub mod auth;
pub mod config;
pub mod server;
pub mod tls;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use hyper::header::{HeaderName, HeaderValue};

pub use server::{serve, Handler, Listener, Query, Reply};

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

/// Loads the web config (if any), then binds: a bad config fails before
/// anything listens, a taken port says what to do.
pub fn bind(addr: SocketAddr, web_config: Option<&Path>) -> Result<Listener> {
    let web = web_config.map(load).transpose()?.unwrap_or_default();
    let tcp = std::net::TcpListener::bind(addr).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow!("cannot listen on {addr}: the address is already in use (another iowarden?). Stop it or pick another port with --listen")
        } else {
            anyhow!("cannot listen on {addr}: {e}")
        }
    })?;
    Ok(Listener { tcp, web })
}
