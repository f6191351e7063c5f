//! The io.prometheus.client exposition model, generated from proto/ by
//! build.rs.
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/io.prometheus.client.rs"));
