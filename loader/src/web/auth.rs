//! HTTP basic authentication against the config's bcrypt hashes.
//!
//! bcrypt costs tens of milliseconds per check on purpose, so: checks run
//! one at a time off the connection tasks (guessing costs an attacker at
//! most one core, and never stalls the server), a password that verified
//! is remembered per user and compared in constant time afterwards (a
//! scraper's every request does not pay bcrypt again), and an unknown user
//! costs a bcrypt check too (no timing difference names the valid users).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use base64::Engine;
use tokio::sync::Semaphore;

/// A cost-10 bcrypt hash (of "-"), checked for unknown users; such a
/// check never succeeds, whatever the password.
const DECOY_HASH: &str = "$2b$10$j5lx3LTwHnWb8Ns0uzNAlO.dK9W5QqMxApbp4xaezm8VsXhs7Xs0K";

pub struct BasicAuth {
    users: BTreeMap<String, String>,
    verified: Mutex<HashMap<String, Vec<u8>>>,
    one_at_a_time: Semaphore,
}

/// The user and password of an `Authorization: Basic` value.
pub fn credentials(header: &str) -> Option<(String, Vec<u8>)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|b| *b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

impl BasicAuth {
    pub fn new(users: BTreeMap<String, String>) -> BasicAuth {
        BasicAuth {
            users,
            verified: Mutex::new(HashMap::new()),
            one_at_a_time: Semaphore::new(1),
        }
    }

    pub fn enabled(&self) -> bool {
        !self.users.is_empty()
    }

    fn remembered(&self, user: &str, password: &[u8]) -> bool {
        let verified = self.verified.lock().unwrap();
        verified
            .get(user)
            .is_some_and(|p| constant_time_eq::constant_time_eq(p, password))
    }

    /// Whether the `Authorization` header value names a user with the
    /// right password.
    pub async fn check(self: &Arc<Self>, header: Option<&str>) -> bool {
        let Some((user, password)) = header.and_then(credentials) else {
            return false;
        };
        if self.remembered(&user, &password) {
            return true;
        }
        let Ok(_turn) = self.one_at_a_time.acquire().await else {
            return false;
        };
        let hash = self
            .users
            .get(&user)
            .cloned()
            .unwrap_or_else(|| DECOY_HASH.to_string());
        let known = self.users.contains_key(&user);
        let pw = password.clone();
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(&pw, &hash).unwrap_or(false))
            .await
            .unwrap_or(false)
            && known;
        if ok {
            self.verified.lock().unwrap().insert(user, password);
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_decode() {
        // "alice:pa:ss" — the password may hold colons.
        assert_eq!(
            credentials("Basic YWxpY2U6cGE6c3M="),
            Some(("alice".into(), b"pa:ss".to_vec()))
        );
        assert_eq!(credentials("Bearer YWxpY2U6cGE6c3M="), None);
        assert_eq!(credentials("Basic !!!"), None);
        assert_eq!(credentials("Basic YWxpY2U="), None);
    }

    #[test]
    fn decoy_hash_is_a_real_cost_10_hash() {
        // Verifying against it must cost what a real user's check costs.
        let parts: bcrypt::HashParts = DECOY_HASH.parse().unwrap();
        assert_eq!(parts.get_cost(), 10);
        assert!(bcrypt::verify("-", DECOY_HASH).unwrap());
        assert!(!bcrypt::verify("x", DECOY_HASH).unwrap());
    }
}
