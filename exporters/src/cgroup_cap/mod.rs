//! A cap on the cgroups exported per host: the K cgroups with the most
//! device time keep their own series, every other cgroup's I/O is summed
//! into one `cgroup="other"` series per (device, op).
//!
//! Totals add up at every scrape, and every exported counter only grows:
//! whatever a series has counted while its cgroup was outside the top K is
//! credited to "other" and stays there. A cgroup entering the top K gets a
//! series counting from that point (its earlier I/O stays in "other"); one
//! leaving it hands its count over to "other" (which jumps by that much
//! while the cgroup's series ends: sum(rate()) over a window holding that
//! moment counts it twice).
//!
//! cap.rs keeps the top K; io and io.pressure (pressure.rs) are folded by
//! one credit fold (credit.rs), the culprit family by its own
//! (culprits.rs), whose pairs name two cgroups.

mod absent;
mod cap;
mod credit;
mod culprits;
mod pressure;

pub use cap::CgroupCap;
