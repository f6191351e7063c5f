//! What the terminal commands print: pure functions of a Snapshot.

pub mod columns;
pub mod culprits;
pub mod keys;
pub mod limits;
pub mod locks;
pub mod names;
pub mod pressure;
pub mod support;
pub mod top;
#[cfg(test)]
mod top_screen_tests;
pub mod tui;
pub mod verdict;
