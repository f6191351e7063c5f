//! Test certificates made at test time with the openssl CLI (no private
//! key is ever committed): a CA, a server certificate for 127.0.0.1 and
//! the shipped DaemonSet's Service name, and a client certificate, all
//! signed by the CA, in a temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::fixtures::succeed;

pub struct Certs {
    pub dir: tempfile::TempDir,
}

/// Runs openssl in `dir` with `args` (split on spaces: no argument holds one).
fn openssl(dir: &Path, args: &str) {
    succeed(
        Command::new("openssl")
            .current_dir(dir)
            .args(args.split_whitespace()),
    );
}

/// A P-256 key and certificate `name`.pem for `cn`, signed by the CA, with
/// v3 extensions `ext`.
fn leaf(dir: &Path, name: &str, cn: &str, ext: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    openssl(
        dir,
        &format!(
            "req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
             -keyout {name}.key -out {name}.csr -subj /CN={cn}"
        ),
    );
    openssl(
        dir,
        &format!(
            "x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
             -days 2 -out {name}.pem -extfile {name}.ext"
        ),
    );
}

impl Certs {
    pub fn new() -> Certs {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        openssl(
            d,
            "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
             -keyout ca.key -out ca.pem -days 2 -subj /CN=iowarden-test-CA \
             -addext basicConstraints=critical,CA:TRUE \
             -addext keyUsage=critical,keyCertSign,cRLSign",
        );
        leaf(
            d,
            "server",
            "127.0.0.1",
            "subjectAltName=IP:127.0.0.1,DNS:iowarden.iowarden.svc\nextendedKeyUsage=serverAuth\n",
        );
        leaf(d, "client", "prometheus", "extendedKeyUsage=clientAuth\n");
        Certs { dir }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// Copies the certificates under the names the shipped configs use:
    /// the DaemonSet's Secret (tls.crt, tls.key, ca.crt) and Prometheus'
    /// (ca.crt, client.crt, client.key).
    pub fn shipped_names(&self) {
        for (from, to) in [
            ("server.pem", "tls.crt"),
            ("server.key", "tls.key"),
            ("ca.pem", "ca.crt"),
            ("client.pem", "client.crt"),
        ] {
            std::fs::copy(self.path(from), self.path(to)).unwrap();
        }
    }

    /// `file`'s path as text, for configs.
    pub fn at(&self, file: &str) -> String {
        self.path(file).display().to_string()
    }
}
