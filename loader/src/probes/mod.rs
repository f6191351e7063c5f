//! One module per BPF object: each loads and attaches its programs
//! (start), reads its maps (read) and fills its part of the snapshot.

pub mod block;
pub mod iocost;
pub mod locks;
pub mod mapped;
pub mod nvme;
