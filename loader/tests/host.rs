//! The host's integration tests, one test binary (each file beside this
//! one is a module of it): the shared fixtures compile once and the suite
//! links once, instead of once per file. Each module's own doc says what it
//! checks; `cargo test --release --test host -- MODULE::` runs one.

mod certs;
mod fixtures;
mod panels;
mod promserver;

mod badinput;
mod bench;
mod bpf_selftest;
mod churn;
mod cost;
mod culprits;
mod culprits_many;
mod dashboards;
mod deb;
mod defaults;
mod deploy;
mod diskstats;
mod fallbacks;
mod fidelity;
mod fleet;
mod fresh;
mod image;
mod journal;
mod kernel;
mod knobs;
mod limits;
mod locks;
mod native;
mod privileges;
mod profile;
mod program_stats;
mod scale;
mod signals;
mod top;
mod vmtest_harness;
mod webconfig;
