//! What the terminal commands print: pure functions of a Snapshot.

pub mod culprits;
pub mod keys;
pub mod limits;
pub mod locks;
pub mod pressure;
pub mod support;
pub mod top;
pub mod tui;
