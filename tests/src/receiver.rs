//! A local HTTP receiver on 127.0.0.1 for the webhook tests (webhooks.rs,
//! and readme.rs's signature checks): each path answers with its queue of
//! replies, and every request is recorded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::thread;

/// What the receiver saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    /// The client's address: one per connection.
    pub peer: Option<std::net::SocketAddr>,
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
/// then with its last one, and every request is recorded.
pub struct Receiver {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    replies: Replies,
}

impl Receiver {
    pub fn start() -> Receiver {
        Receiver::serve(tiny_http::Server::http("127.0.0.1:0").unwrap())
    }

    /// An HTTPS receiver with this certificate and key (PEM).
    pub fn start_tls(certificate: String, private_key: String) -> Receiver {
        Receiver::serve(
            tiny_http::Server::https(
                "127.0.0.1:0",
                tiny_http::SslConfig {
                    certificate: certificate.into_bytes(),
                    private_key: private_key.into_bytes(),
                },
            )
            .unwrap(),
        )
    }

    fn serve(server: tiny_http::Server) -> Receiver {
        let port = server.server_addr().to_ip().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let replies: Replies = Arc::new(Mutex::new(Vec::new()));
        let (seen_by_server, replies_by_server) = (seen.clone(), replies.clone());
        thread::spawn(move || {
            let mut held = Vec::new();
            for mut request in server.incoming_requests() {
                let mut body = String::new();
                request.as_reader().read_to_string(&mut body).unwrap();
                let path = request.url().to_string();
                let headers = request
                    .headers()
                    .iter()
                    .map(|h| (h.field.to_string(), h.value.to_string()))
                    .collect();
                seen_by_server.lock().unwrap().push(Seen {
                    path: path.clone(),
                    peer: request.remote_addr().copied(),
                    headers,
                    body,
                });
                let reply = {
                    let mut replies = replies_by_server.lock().unwrap();
                    match replies
                        .iter_mut()
                        .find(|(p, _)| path.starts_with(p.as_str()))
                    {
                        Some((_, queue)) if queue.len() > 1 => queue.pop_front().unwrap(),
                        Some((_, queue)) => queue.front().cloned().unwrap(),
                        None => Reply::Status(200, Vec::new()),
                    }
                };
                match reply {
                    Reply::Hang => held.push(request),
                    Reply::Body(status, body) => {
                        let response =
                            tiny_http::Response::from_string(body).with_status_code(status);
                        let _ = request.respond(response);
                    }
                    Reply::Status(status, headers) => {
                        let mut response =
                            tiny_http::Response::from_string(format!("reply {status}"))
                                .with_status_code(status);
                        for (name, value) in headers {
                            response.add_header(
                                tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes())
                                    .unwrap(),
                            );
                        }
                        let _ = request.respond(response);
                    }
                }
            }
        });
        Receiver {
            port,
            seen,
            replies,
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
