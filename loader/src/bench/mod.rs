//! `iowarden bench`: isol-bench's isolation desiderata (D1 overhead, D2
//! proportional fairness, D3 priority vs utilisation, D4 bursts) and the
//! cost of the I/O schedulers, measured from the block layer with
//! iowarden's own programs and cross-checked against fio.
//!
//! Layout: `params` (what a run is asked for), `score` (the math) and `verdict`/`report` (marks, JSON schema,
//! Markdown) are pure; `fio` builds jobs and parses fio's output; `knob`
//! says which knobs a host has and sets them through the journaled writer;
//! `phase` runs fio per cgroup under the monitor; `suites` composes phases;
//! `plot` draws SVGs. loader/src/bench/README.md documents the output.

pub mod fio;
pub mod knob;
mod params;
pub mod phase;
mod phase_loop;
pub mod plot;
pub mod report;
pub mod run;
pub mod score;
pub mod suites;
pub mod verdict;

pub use params::{parse_knobs, parse_suites, Knob, Params, Suite};
