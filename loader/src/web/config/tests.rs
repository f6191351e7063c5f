use super::*;

const HASH: &str = "$2y$10$X0wQ9DmN8EmFbLdqDSGm6uD2TPuaSbQXyNZrDXSihHVrVgbwJCKPe";

#[test]
fn full_config_parses() {
    let text = format!(
        "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n  min_version: TLS13\n\
         http_server_config:\n  http2: false\n  headers:\n    strict-transport-security: max-age=31536000\n\
         basic_auth_users:\n  prometheus: '{HASH}'\n"
    );
    let w = parse_web_config(&text).unwrap();
    let tls = w.tls.unwrap();
    assert_eq!(tls.client_auth, ClientAuth::RequireAndVerifyClientCert);
    assert_eq!(tls.min_version, TlsVersion::Tls13);
    assert_eq!(w.users["prometheus"], HASH);
    assert_eq!(
        w.headers,
        vec![(
            "Strict-Transport-Security".to_string(),
            "max-age=31536000".to_string()
        )]
    );
}

#[test]
fn empty_file_is_plain_http() {
    assert_eq!(parse_web_config("").unwrap(), WebSpec::default());
    assert_eq!(parse_web_config("{}\n").unwrap(), WebSpec::default());
}

/// Each bad config is refused with an error naming the field.
#[test]
fn bad_configs_name_the_field() {
    for (text, field) in [
        ("tls_server_config:\n  cert_file: c\n", "key_file"),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: Bogus\n",
            "client_auth_type",
        ),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: RequireAnyClientCert\n",
            "client_auth_type",
        ),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: RequireAndVerifyClientCert\n",
            "client_ca_file",
        ),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_ca_file: ca\n",
            "client_ca_file",
        ),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS10\n",
            "min_version",
        ),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  cipher_suites: [x]\n",
            "cipher_suites",
        ),
        ("basic_auth_users:\n  alice: hunter2\n", "basic_auth_users.alice"),
        ("basic_auth_users:\n  alice: $2y$99$abc\n", "basic_auth_users.alice"),
        (
            "http_server_config:\n  headers:\n    Content-Type: text/html\n",
            "headers.Content-Type",
        ),
        ("tls_server_confg: {}\n", "tls_server_confg"),
        ("basic_auth_users: [a, b]\n", "basic_auth_users"),
    ] {
        let e = parse_web_config(text).unwrap_err();
        assert!(e.contains(field), "{text:?}: {e}");
    }
}
