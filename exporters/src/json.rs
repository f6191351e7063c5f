//! JSON encoding of a [`Snapshot`] (`/snapshot.json`, `iowarden snapshot --json`).

use crate::model::Snapshot;

pub fn encode_json(snap: &Snapshot) -> String {
    serde_json::to_string(snap).expect("a snapshot always serializes")
}

pub fn decode_json(s: &str) -> Result<Snapshot, serde_json::Error> {
    serde_json::from_str(s)
}
