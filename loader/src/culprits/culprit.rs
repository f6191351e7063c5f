//! Whom a request's time is charged to.

/// Whom a victim's time went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Culprit {
    /// Its own share of the device: its service.
    Service,
    /// A series' requests, by slot (the victim's own: its own queue).
    Series(u32),
    /// The requests of the series of this op not named apart on the
    /// device (beyond its [`NAMED`] busiest).
    ///
    /// [`NAMED`]: super::series::NAMED
    Other(iowarden_exporters::Op),
}
