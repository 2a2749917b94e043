//! A local HTTP receiver on 127.0.0.1 for the webhook tests (webhooks.rs,
//! and readme.rs's signature checks): each path answers with its queue of
//! replies, and every request is recorded.
//!
//! Served by hyper on a tokio runtime of its own, each connection a task of
//! its own: the worker keeps its connections open, and a server with a pool
//! of connection threads (tiny_http's, here before) left a new connection
//! unread under load until another closed, the worker's request timing out
//! after 30 s.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// What the receiver saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    /// The client's address: one per connection.
    pub peer: Option<SocketAddr>,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How the receiver answers a request to a path: a status with headers,
/// or never (the request is held open).
#[derive(Clone)]
pub enum Reply {
    Status(u16, Vec<(&'static str, String)>),
    /// A status with a body of its own.
    Body(u16, String),
    Hang,
}

/// The replies of each path, in order.
type Replies = Arc<Mutex<Vec<(String, VecDeque<Reply>)>>>;

/// A local HTTP receiver: each path answers with its queue of replies,
/// then with its last one, and every request is recorded. Dropping it
/// stops it.
pub struct Receiver {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    replies: Replies,
    _runtime: tokio::runtime::Runtime,
}

/// What every connection's task shares.
#[derive(Clone)]
struct Shared {
    seen: Arc<Mutex<Vec<Seen>>>,
    replies: Replies,
    tls: Option<TlsAcceptor>,
}

impl Receiver {
    pub fn start() -> Receiver {
        Receiver::serve(None)
    }

    /// An HTTPS receiver with this certificate and key (PEM).
    pub fn start_tls(certificate: String, private_key: String) -> Receiver {
        let chain = CertificateDer::pem_slice_iter(certificate.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(private_key.as_bytes()).unwrap();
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap();
        Receiver::serve(Some(TlsAcceptor::from(Arc::new(config))))
    }

    fn serve(tls: Option<TlsAcceptor>) -> Receiver {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_io()
            .build()
            .unwrap();
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Shared {
            seen: Arc::new(Mutex::new(Vec::new())),
            replies: Arc::new(Mutex::new(Vec::new())),
            tls,
        };
        runtime.spawn(accept(listener, shared.clone()));
        Receiver {
            port,
            seen: shared.seen,
            replies: shared.replies,
            _runtime: runtime,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The replies of `path` from now on (instead of those it had).
    pub fn answer(&self, path: &str, replies: Vec<Reply>) {
        let mut all = self.replies.lock().unwrap();
        all.retain(|(p, _)| p != path);
        all.push((path.to_string(), replies.into()));
    }

    pub fn seen(&self, path: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path.starts_with(path))
            .cloned()
            .collect()
    }
}

async fn accept(listener: TcpListener, shared: Shared) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(connection(stream, peer, shared.clone()));
    }
}

/// Serves one connection's requests, one after another, until it closes.
async fn connection(stream: TcpStream, peer: SocketAddr, shared: Shared) {
    let service = {
        let shared = shared.clone();
        service_fn(move |request| answer(request, peer, shared.clone()))
    };
    let http = http1::Builder::new();
    // (an error is the client's doing, a connection closed say: the tests
    // look at what was seen)
    let _ = match shared.tls {
        Some(acceptor) => match acceptor.accept(stream).await {
            Ok(stream) => http.serve_connection(TokioIo::new(stream), service).await,
            Err(_) => return,
        },
        None => http.serve_connection(TokioIo::new(stream), service).await,
    };
}

async fn answer(
    request: Request<Incoming>,
    peer: SocketAddr,
    shared: Shared,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().to_string();
    let headers = request
        .headers()
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.to_string(), value)
        })
        .collect();
    let body = match request.into_body().collect().await {
        Ok(body) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
        Err(_) => String::new(),
    };
    shared.seen.lock().unwrap().push(Seen {
        path: path.clone(),
        peer: Some(peer),
        headers,
        body,
    });
    let reply = {
        let mut replies = shared.replies.lock().unwrap();
        match replies
            .iter_mut()
            .find(|(p, _)| path.starts_with(p.as_str()))
        {
            Some((_, queue)) if queue.len() > 1 => queue.pop_front().unwrap(),
            Some((_, queue)) => queue.front().cloned().unwrap(),
            None => Reply::Status(200, Vec::new()),
        }
    };
    let (status, headers, body) = match reply {
        Reply::Hang => std::future::pending().await,
        Reply::Body(status, body) => (status, Vec::new(), body),
        Reply::Status(status, headers) => (status, headers, format!("reply {status}")),
    };
    let mut response = Response::builder()
        .status(status)
        .header("Content-Type", "text/plain; charset=UTF-8");
    for (name, value) in headers {
        response = response.header(name, value);
    }
    Ok(response.body(Full::new(Bytes::from(body))).unwrap())
}
