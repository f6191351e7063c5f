//! The rustls server configuration a checked `tls_server_config` names:
//! certificate chain, private key, client CA and protocol versions, read
//! from the files at start so that a bad one stops the daemon before it
//! listens.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::config::{ClientAuth, TlsSpec, TlsVersion};

/// Resolves `path` as exporter-toolkit does: relative to the config file.
fn resolve(config_dir: &Path, path: &str) -> PathBuf {
    config_dir.join(path)
}

fn read_certs(path: &Path, field: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow!("tls_server_config.{field}: {}: {e}", path.display()))?;
    if certs.is_empty() {
        bail!(
            "tls_server_config.{field}: {}: no PEM certificate in it",
            path.display()
        );
    }
    Ok(certs)
}

fn versions(spec: &TlsSpec) -> Vec<&'static rustls::SupportedProtocolVersion> {
    [
        (TlsVersion::Tls12, &rustls::version::TLS12),
        (TlsVersion::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (spec.min_version..=spec.max_version).contains(v))
    .map(|(_, p)| p)
    .collect()
}

fn client_verifier(
    spec: &TlsSpec,
    config_dir: &Path,
    provider: &Arc<rustls::crypto::CryptoProvider>,
) -> Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>> {
    let Some(ca) = spec.client_ca_file.as_deref() else {
        return Ok(None);
    };
    let path = resolve(config_dir, ca);
    let mut roots = RootCertStore::empty();
    for cert in read_certs(&path, "client_ca_file")? {
        roots
            .add(cert)
            .with_context(|| format!("tls_server_config.client_ca_file: {}", path.display()))?;
    }
    let builder =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider));
    let builder = match spec.client_auth {
        ClientAuth::VerifyClientCertIfGiven => builder.allow_unauthenticated(),
        _ => builder,
    };
    let verifier = builder
        .build()
        .with_context(|| format!("tls_server_config.client_ca_file: {}", path.display()))?;
    Ok(Some(verifier))
}

/// The server configuration, or an error naming the field and file.
pub fn server_config(spec: &TlsSpec, config_dir: &Path) -> Result<Arc<ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert_path = resolve(config_dir, &spec.cert_file);
    let certs = read_certs(&cert_path, "cert_file")?;
    let key_path = resolve(config_dir, &spec.key_file);
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
        anyhow!(
            "tls_server_config.key_file: {}: {e} (a PEM private key)",
            key_path.display()
        )
    })?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions(spec))
        .context("tls_server_config.min_version/max_version")?;
    let builder = match client_verifier(spec, config_dir, &provider)? {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        anyhow!(
            "tls_server_config.key_file: {} does not go with cert_file {}: {e}",
            key_path.display(),
            cert_path.display()
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
