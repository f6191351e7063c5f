//! The HTTP side of `iowarden run` and `tune`: the exporter-toolkit web
//! configuration (`--web.config.file`: TLS, basic auth, headers; parsed in
//! config.rs, loaded in loaded.rs) and the server that applies it with
//! limits on what clients may send.

pub mod auth;
pub mod config;
pub mod loaded;
pub mod server;
pub mod tls;

pub use loaded::{load, WebConfig};
pub use server::{bind, serve, Handler, Listener, Query, Reply};
