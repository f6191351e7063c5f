//! The web configuration file of `--web.config.file`, in the format of
//! Prometheus' exporter-toolkit (what node_exporter, blackbox_exporter and
//! ebpf_exporter read): TLS, bcrypt basic-auth users and response headers.
//! This file only parses and checks the text (no file is read here, so
//! that the fuzz crate compiles it alone); tls.rs reads the files named.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The file as written. Unknown keys are refused (exporter-toolkit reads
/// it strictly too): a misspelt `client_auth_type` must not silently turn
/// client certificates off.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebConfig {
    tls_server_config: Option<RawTlsConfig>,
    http_server_config: Option<RawHttpConfig>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTlsConfig {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttpConfig {
    /// Accepted for compatibility; iowarden serves HTTP/1.1 only.
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// Which client certificates the TLS server asks for. exporter-toolkit's
/// RequestClientCert and RequireAnyClientCert (a certificate taken without
/// verifying it) are refused: they authenticate nobody.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    NoClientCert,
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

/// The TLS protocol versions rustls speaks (TLS 1.0 and 1.1 are refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// `tls_server_config`, checked; paths as written (relative ones are
/// relative to the config file, as in exporter-toolkit).
#[derive(Clone, Debug, PartialEq)]
pub struct TlsSpec {
    pub cert_file: String,
    pub key_file: String,
    pub client_auth: ClientAuth,
    pub client_ca_file: Option<String>,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
}

/// A checked web configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WebSpec {
    pub tls: Option<TlsSpec>,
    /// User name → bcrypt hash (checked to be one).
    pub users: BTreeMap<String, String>,
    /// Headers added to every response.
    pub headers: Vec<(String, String)>,
}

/// The headers exporter-toolkit lets a config set (the others would let a
/// config change what the response means, e.g. Content-Type).
pub const ALLOWED_HEADERS: [&str; 5] = [
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Strict-Transport-Security",
];

/// Parses and checks the text of a web config. Errors name the field.
pub fn parse_web_config(text: &str) -> Result<WebSpec, String> {
    // An empty file is an empty config (plain HTTP, no auth), as in exporter-toolkit.
    let raw: RawWebConfig = if text.trim().is_empty() {
        RawWebConfig::default()
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?
    };
    let tls = raw.tls_server_config.map(check_tls).transpose()?;
    let users = check_users(raw.basic_auth_users.unwrap_or_default())?;
    let http = raw.http_server_config.unwrap_or_default();
    let _ = http.http2;
    let headers = check_headers(http.headers.unwrap_or_default())?;
    Ok(WebSpec {
        tls,
        users,
        headers,
    })
}

fn check_tls(raw: RawTlsConfig) -> Result<TlsSpec, String> {
    let required = |v: Option<String>, field: &str| {
        v.filter(|s| !s.trim().is_empty())
            .ok_or_else(|| format!("tls_server_config.{field}: missing (a TLS server needs it)"))
    };
    let cert_file = required(raw.cert_file, "cert_file")?;
    let key_file = required(raw.key_file, "key_file")?;
    let client_auth = match raw.client_auth_type.as_deref().unwrap_or("NoClientCert") {
        "NoClientCert" => ClientAuth::NoClientCert,
        "VerifyClientCertIfGiven" => ClientAuth::VerifyClientCertIfGiven,
        "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerifyClientCert,
        t @ ("RequestClientCert" | "RequireAnyClientCert") => {
            return Err(format!(
                "tls_server_config.client_auth_type: {t} takes a client certificate without verifying it; \
                 use VerifyClientCertIfGiven or RequireAndVerifyClientCert with client_ca_file"
            ))
        }
        t => {
            return Err(format!(
                "tls_server_config.client_auth_type: unknown value '{t}' (NoClientCert, \
                 VerifyClientCertIfGiven or RequireAndVerifyClientCert)"
            ))
        }
    };
    let client_ca_file = raw.client_ca_file.filter(|s| !s.trim().is_empty());
    match (client_auth, &client_ca_file) {
        (ClientAuth::NoClientCert, Some(_)) => {
            return Err("tls_server_config.client_ca_file: given, but client_auth_type is \
                        NoClientCert (no client certificate would be checked against it)"
                .into())
        }
        (ClientAuth::NoClientCert, None) | (_, Some(_)) => {}
        (_, None) => {
            return Err(
                "tls_server_config.client_ca_file: missing (verifying client certificates needs the CA)"
                    .into(),
            )
        }
    }
    let min_version = tls_version(raw.min_version.as_deref(), "min_version", TlsVersion::Tls12)?;
    let max_version = tls_version(raw.max_version.as_deref(), "max_version", TlsVersion::Tls13)?;
    if min_version > max_version {
        return Err("tls_server_config.min_version: above max_version".into());
    }
    Ok(TlsSpec {
        cert_file,
        key_file,
        client_auth,
        client_ca_file,
        min_version,
        max_version,
    })
}

fn tls_version(v: Option<&str>, field: &str, default: TlsVersion) -> Result<TlsVersion, String> {
    match v {
        None => Ok(default),
        Some("TLS12") => Ok(TlsVersion::Tls12),
        Some("TLS13") => Ok(TlsVersion::Tls13),
        Some(t @ ("TLS10" | "TLS11")) => Err(format!(
            "tls_server_config.{field}: {t} is not supported (TLS12 or TLS13)"
        )),
        Some(t) => Err(format!(
            "tls_server_config.{field}: unknown version '{t}' (TLS12 or TLS13)"
        )),
    }
}

/// Every password must be a bcrypt hash with a cost bcrypt accepts: a
/// plain-text password in the file is refused, never compared.
fn check_users(users: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, String> {
    for (user, hash) in &users {
        if user.is_empty() || user.contains(':') {
            return Err(format!(
                "basic_auth_users: user name '{user}' is empty or holds ':' (no client can send it)"
            ));
        }
        let parts: bcrypt::HashParts = hash.parse().map_err(|_| {
            format!("basic_auth_users.{user}: not a bcrypt hash (give the output of htpasswd -nBC 10 or bcrypt, never the password)")
        })?;
        if !(4..=31).contains(&parts.get_cost()) {
            return Err(format!(
                "basic_auth_users.{user}: bcrypt cost {} outside 4..31",
                parts.get_cost()
            ));
        }
    }
    Ok(users)
}

fn check_headers(headers: BTreeMap<String, String>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (name, value) in headers {
        let Some(canonical) = ALLOWED_HEADERS
            .iter()
            .find(|h| h.eq_ignore_ascii_case(&name))
        else {
            return Err(format!(
                "http_server_config.headers.{name}: not settable (only {})",
                ALLOWED_HEADERS.join(", ")
            ));
        };
        let printable = value
            .bytes()
            .all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
        if value.trim().is_empty() || !printable {
            return Err(format!(
                "http_server_config.headers.{name}: value must be non-empty printable ASCII"
            ));
        }
        out.push((canonical.to_string(), value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
