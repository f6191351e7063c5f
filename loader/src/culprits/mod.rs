//! The culprit account's one home: whom each request waited behind,
//! computed from the completion program's log (bpf/block/culprits.h). Every
//! device's requests are replayed in time order (replay.rs) once no
//! request still in flight can precede them (horizon.rs), and each one's
//! time is split by processor sharing (docs/culprits.md). Pure logic: the
//! log is read by probes/block/culprits.rs.

pub mod cost;
mod culprit;
pub mod horizon;
pub mod replay;
mod series;

pub use culprit::Culprit;
pub use horizon::Horizon;
pub use replay::{Replay, Request, Untold};
pub use series::NAMED;
