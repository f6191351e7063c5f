//! The culprit account's one home: whom each request waited behind,
//! computed from the completion program's log (bpf/block/culprits.h). Every
//! device's requests are replayed in time order (replay.rs) once no
//! request still in flight can precede them (horizon.rs), and each one's
//! time is split by processor sharing (docs/culprits.md). Pure logic: the
//! log is read by probes/block/culprits.rs.

pub mod cost;
pub mod horizon;
pub mod replay;
mod series;

pub use horizon::Horizon;
pub use replay::{Replay, Request};
pub use series::NAMED;

/// Whom a victim's time went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Culprit {
    /// Its own share of the device: its service.
    Service,
    /// A series' requests, by slot (the victim's own: its own queue).
    Series(u32),
    /// The requests of the series of this op not named apart on the
    /// device (beyond its [`NAMED`] busiest).
    Other(iowarden_exporters::Op),
}
