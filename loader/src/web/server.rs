//! The HTTP(S) server of /metrics: hyper on a single-threaded tokio
//! runtime, TLS by rustls, with limits a hostile or broken client cannot
//! get around — request head size and header count (431), a deadline for
//! the TLS handshake and for every request head (slow-loris), a cap on
//! open connections (beyond it a new one is closed at once), only GET and
//! HEAD (405), only the known paths (404). Encoding a response and bcrypt
//! run on the blocking pool, so a slow one never stalls the accept loop.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context as _, Result};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::auth::BasicAuth;
use super::loaded::{self, WebConfig};

/// Open connections served at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 256;
/// Request line plus headers, in bytes (hyper's minimum buffer).
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
pub const MAX_HEADERS: usize = 64;
/// For the TLS handshake, and for each request head from its first byte
/// (and on a kept-alive connection, from the end of the previous response).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection is closed after this long whatever it does (a client that
/// never reads its response frees its slot).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);

/// A request as the daemon's handler sees it.
pub struct Query {
    pub path: String,
    pub accept: Option<String>,
}

/// The handler's answer.
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

pub type Handler = Arc<dyn Fn(&Query) -> Reply + Send + Sync>;

struct Context {
    handler: Handler,
    auth: Arc<BasicAuth>,
    headers: Vec<(hyper::header::HeaderName, HeaderValue)>,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// A bound listener and the configuration it serves with.
pub struct Listener {
    pub tcp: std::net::TcpListener,
    pub web: WebConfig,
}

/// Loads the web config (if any), then binds: a bad config fails before
/// anything listens, a taken port says what to do.
pub fn bind(addr: SocketAddr, web_config: Option<&Path>) -> Result<Listener> {
    let web = web_config
        .map(loaded::load)
        .transpose()?
        .unwrap_or_default();
    let tcp = std::net::TcpListener::bind(addr).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow!("cannot listen on {addr}: the address is already in use (another iowarden?). Stop it or pick another port with --listen")
        } else {
            anyhow!("cannot listen on {addr}: {e}")
        }
    })?;
    Ok(Listener { tcp, web })
}

impl Listener {
    pub fn local_addr(&self) -> SocketAddr {
        self.tcp.local_addr().expect("bound socket has an address")
    }

    pub fn scheme(&self) -> &'static str {
        if self.web.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

/// Serves until `stop` is set.
pub fn serve(listener: Listener, handler: Handler, stop: Arc<AtomicBool>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(2)
        .build()
        .context("starting the HTTP runtime")?;
    let result = runtime.block_on(accept_loop(listener, handler, stop));
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

fn context(web: WebConfig, handler: Handler) -> Context {
    Context {
        handler,
        auth: Arc::new(BasicAuth::new(web.users)),
        headers: web.headers,
        tls: web.tls.map(tokio_rustls::TlsAcceptor::from),
    }
}

async fn accept_loop(listener: Listener, handler: Handler, stop: Arc<AtomicBool>) -> Result<()> {
    listener.tcp.set_nonblocking(true)?;
    let tcp = tokio::net::TcpListener::from_std(listener.tcp)?;
    let ctx = Arc::new(context(listener.web, handler));
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    while !stop.load(Ordering::Relaxed) {
        let stream = match tokio::time::timeout(Duration::from_millis(200), tcp.accept()).await {
            Err(_) => continue,
            Ok(Ok((stream, _))) => stream,
            // Out of descriptors or a connection reset before accept:
            // back off briefly instead of spinning.
            Ok(Err(_)) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            continue; // over the cap: dropping the stream closes it
        };
        let ctx = Arc::clone(&ctx);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection(stream, ctx)).await;
            drop(slot);
        });
    }
    Ok(())
}

async fn connection(stream: TcpStream, ctx: Arc<Context>) {
    let _ = stream.set_nodelay(true);
    match &ctx.tls {
        Some(acceptor) => {
            let handshake = tokio::time::timeout(HEAD_TIMEOUT, acceptor.accept(stream)).await;
            if let Ok(Ok(tls)) = handshake {
                http1(TokioIo::new(tls), ctx).await;
            }
        }
        None => http1(TokioIo::new(stream), ctx).await,
    }
}

async fn http1<I>(io: I, ctx: Arc<Context>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let ctx = Arc::clone(&ctx);
        async move { Ok::<_, Infallible>(respond(req, ctx).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .serve_connection(io, service)
        .await;
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn header(req: &Request<Incoming>, name: hyper::header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

async fn respond(req: Request<Incoming>, ctx: Arc<Context>) -> Response<Full<Bytes>> {
    let mut resp = route(&req, &ctx).await;
    for (name, value) in &ctx.headers {
        resp.headers_mut().insert(name.clone(), value.clone());
    }
    resp
}

/// Authentication first (an unauthenticated client learns nothing, not
/// even which paths exist), then method, then path.
async fn route(req: &Request<Incoming>, ctx: &Arc<Context>) -> Response<Full<Bytes>> {
    if ctx.auth.enabled() && !ctx.auth.check(header(req, AUTHORIZATION)).await {
        let mut r = plain(StatusCode::UNAUTHORIZED, "Unauthorized\n");
        r.headers_mut().insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"iowarden\""),
        );
        return r;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let query = Query {
        path: req.uri().path().to_string(),
        accept: header(req, hyper::header::ACCEPT).map(str::to_string),
    };
    let handler = Arc::clone(&ctx.handler);
    let Ok(reply) = tokio::task::spawn_blocking(move || handler(&query)).await else {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, "handler failed\n");
    };
    let mut r = Response::new(Full::new(Bytes::from(reply.body)));
    *r.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    r
}
