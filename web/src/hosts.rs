//! Against DNS rebinding. A page of a name that its owner makes resolve to
//! this machine is, to the browser, of the same origin as queue-web: it
//! could read every page and post every form, cookies and CSRF token
//! included. What gives it away is the name the browser asked for, so a
//! request is answered only when its `Host` names where queue-web listens
//! (or a name of --allow-host), and a POST only when its `Origin` (else its
//! `Referer`) is such a host too.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{header, HeaderMap, HeaderName, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::security::with_safety_headers;

/// A host a request may name, on one port or (from --allow-host without
/// one) on any.
struct Allowed {
    host: String,
    port: Option<u16>,
}

pub struct Hosts {
    allowed: Vec<Allowed>,
}

/// `NAME` or `NAME:PORT` (an IPv6 address in brackets), lowercased; None
/// for anything else, user information included.
fn parse_authority(text: &str) -> Option<Allowed> {
    let authority: Authority = text.parse().ok()?;
    let host = authority.host();
    if authority.as_str().contains('@') || host.is_empty() {
        return None;
    }
    // (after the host, nothing or `:` and a port number)
    let port = match &authority.as_str()[host.len()..] {
        "" => None,
        rest => Some(rest.strip_prefix(':')?.parse::<u16>().ok()?),
    };
    Some(Allowed {
        host: host.to_ascii_lowercase(),
        port,
    })
}

fn host_of(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

impl Hosts {
    /// The address bound (its port the one the OS picked for port 0), the
    /// loopback names when it is a loopback address, and `names`.
    pub fn new(bound: SocketAddr, names: &[String]) -> Result<Hosts, String> {
        let port = Some(bound.port());
        let mut allowed = vec![Allowed {
            host: host_of(bound.ip()),
            port,
        }];
        if bound.ip().is_loopback() {
            for host in ["localhost", "127.0.0.1", "[::1]"] {
                allowed.push(Allowed {
                    host: host.into(),
                    port,
                });
            }
        }
        for name in names {
            allowed.push(parse_authority(name).ok_or_else(|| {
                format!("--allow-host {name:?}: a host name or address, with or without :PORT")
            })?);
        }
        Ok(Hosts { allowed })
    }

    fn allows(&self, host: &str, port: u16) -> bool {
        self.allowed
            .iter()
            .any(|a| a.host == host && a.port.is_none_or(|p| p == port))
    }

    /// A `Host` header's value (port 80 when it names none: queue-web
    /// speaks plain HTTP).
    fn allows_host(&self, value: &str) -> bool {
        parse_authority(value).is_some_and(|a| self.allows(&a.host, a.port.unwrap_or(80)))
    }

    /// An `Origin`, or the origin of a `Referer`: http or https (behind a
    /// TLS proxy), of an allowed host.
    fn allows_origin(&self, value: &str) -> bool {
        let Ok(url) = url::Url::parse(value) else {
            return false;
        };
        let host = url.host_str().map(str::to_ascii_lowercase);
        matches!(url.scheme(), "http" | "https")
            && host
                .zip(url.port_or_known_default())
                .is_some_and(|(host, port)| self.allows(&host, port))
    }

    /// Why `request` is refused, if it is.
    fn refusal(&self, request: &Request) -> Option<Response> {
        let headers = request.headers();
        let host_ok = only(headers, header::HOST).is_some_and(|h| self.allows_host(h))
            && request
                .uri()
                .authority()
                .is_none_or(|a| self.allows_host(a.as_str()));
        if !host_ok {
            let text = "queue-web answers only requests for the address it listens on, or for \
                        a name given by --allow-host; this one named another host, or none \
                        (docs/dashboard.md, \"Safe by default\")\n";
            return Some((StatusCode::MISDIRECTED_REQUEST, text).into_response());
        }
        let reads = request.method() == Method::GET || request.method() == Method::HEAD;
        let from = match headers.get(header::ORIGIN) {
            Some(_) => only(headers, header::ORIGIN),
            // (a GET's Referer may well be another site's link to this one)
            None if !reads => only(headers, header::REFERER),
            None => return None,
        };
        match from {
            Some(origin) if self.allows_origin(origin) => None,
            Some(_) => Some(
                (
                    StatusCode::FORBIDDEN,
                    "queue-web refuses a request sent by a page of another origin\n",
                )
                    .into_response(),
            ),
            None => Some(
                (
                    StatusCode::FORBIDDEN,
                    "queue-web refuses a POST without an Origin or Referer header: it cannot \
                     tell which page sent it\n",
                )
                    .into_response(),
            ),
        }
    }
}

/// The value of a header sent once, as text.
fn only(headers: &HeaderMap, name: HeaderName) -> Option<&str> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => value.to_str().ok(),
        _ => None,
    }
}

/// Every request passes here before anything else.
pub async fn guard(State(hosts): State<Arc<Hosts>>, request: Request, next: Next) -> Response {
    match hosts.refusal(&request) {
        Some(refusal) => with_safety_headers(refusal),
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::Hosts;

    fn hosts(bound: &str, names: &[&str]) -> Hosts {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        Hosts::new(bound.parse().unwrap(), &names).unwrap()
    }

    #[test]
    fn a_loopback_address_answers_for_the_loopback_names_on_its_port() {
        let h = hosts("127.0.0.1:8080", &[]);
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LocalHost:8080",
            "[::1]:8080",
        ] {
            assert!(h.allows_host(host), "{host}");
        }
        for host in [
            "rebind.evil.example:8080",
            "localhost",
            "localhost:8081",
            "127.0.0.1",
            "user@localhost:8080",
            "localhost:",
            "",
        ] {
            assert!(!h.allows_host(host), "{host}");
        }
        assert!(h.allows_origin("http://localhost:8080"));
        assert!(h.allows_origin("http://127.0.0.1:8080/db/x/queue/y?z=1"));
        for origin in [
            "http://evil.example",
            "http://localhost:8081",
            "null",
            "",
            "file:///tmp/x.html",
            "http://localhost.evil.example:8080",
        ] {
            assert!(!h.allows_origin(origin), "{origin}");
        }
        let v6 = hosts("[::1]:9000", &[]);
        assert!(v6.allows_host("[::1]:9000") && v6.allows_host("localhost:9000"));
        assert!(v6.allows_origin("http://[::1]:9000"));
    }

    #[test]
    fn another_address_answers_for_itself_and_the_names_allowed() {
        let h = hosts(
            "0.0.0.0:8080",
            &["dash.example.com", "Other.Example:9443", "10.0.0.5"],
        );
        assert!(h.allows_host("0.0.0.0:8080"));
        assert!(!h.allows_host("localhost:8080") && !h.allows_host("127.0.0.1:8080"));
        // a name without a port: on any port, or none (a proxy's Host)
        assert!(h.allows_host("dash.example.com") && h.allows_host("DASH.example.com:8080"));
        assert!(h.allows_origin("https://dash.example.com"));
        // a name with one: on that port only
        assert!(h.allows_host("other.example:9443") && !h.allows_host("other.example:8080"));
        assert!(h.allows_origin("https://other.example:9443"));
        assert!(!h.allows_origin("https://other.example"));
        assert!(h.allows_host("10.0.0.5:8080"));
        assert!(!h.allows_host("dash.example.com.evil.example"));
        assert!(!h.allows_origin("http://evil.example"));
    }

    #[test]
    fn a_bad_name_is_refused_at_start() {
        for bad in [
            "",
            "a b",
            "user@host",
            "host/path",
            "host:port",
            "host:70000",
            "http://host",
        ] {
            let names = vec![bad.to_string()];
            assert!(
                Hosts::new("127.0.0.1:1".parse().unwrap(), &names).is_err(),
                "{bad:?}"
            );
        }
    }
}
