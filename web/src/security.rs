//! Safe by default: an optional token on every request, a session cookie
//! whose CSRF token every POST must carry, no POST at all when read-only,
//! and headers that keep the pages out of frames and scripts out of them.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use hmac::{Mac, SimpleHmac};
use rand::RngCore;
use sha2::Sha256;

use crate::failure::Failure;

const SESSION_COOKIE: &str = "queue_web_session";
const TOKEN_COOKIE: &str = "queue_web_token";

pub struct Security {
    token: Option<String>,
    /// --read-only: no action is shown, and every POST is refused.
    pub read_only: bool,
    /// Signs the sessions' CSRF tokens; new at every start.
    key: [u8; 32],
}

/// The session of a request (from its cookie, or new).
#[derive(Clone)]
pub struct Session(pub String);

impl Security {
    pub fn new(token: Option<String>, read_only: bool) -> Security {
        let mut key = [0; 32];
        rand::thread_rng().fill_bytes(&mut key);
        Security {
            token,
            read_only,
            key,
        }
    }

    fn mac(&self) -> SimpleHmac<Sha256> {
        SimpleHmac::<Sha256>::new_from_slice(&self.key).expect("any key length")
    }

    /// The CSRF token of a session: its HMAC, so nothing is stored.
    pub fn csrf_token(&self, session: &Session) -> String {
        let mut mac = self.mac();
        mac.update(session.0.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// A POST's form token must be its session's.
    pub fn check_csrf(&self, session: &Session, token: &str) -> Result<(), Failure> {
        let mut mac = self.mac();
        mac.update(session.0.as_bytes());
        let given = hex::decode(token).unwrap_or_default();
        mac.verify_slice(&given).map_err(|_| {
            Failure::Forbidden(
                "the form's CSRF token is missing or not this session's: reload the page".into(),
            )
        })
    }

    fn token_matches(&self, given: &str) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        // compared as HMACs, in constant time
        let mut mac = self.mac();
        mac.update(token.as_bytes());
        let mut other = self.mac();
        other.update(given.as_bytes());
        mac.verify(&other.finalize().into_bytes()).is_ok()
    }
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

fn query_token(request: &Request) -> Option<String> {
    request.uri().query()?.split('&').find_map(|pair| {
        let value = pair.strip_prefix("token=")?;
        Some(
            percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned(),
        )
    })
}

fn set_cookie(name: &str, value: &str) -> HeaderValue {
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Strict"
    ))
    .expect("hex and token characters")
}

/// Every request passes here first.
pub async fn guard(
    State(security): State<Arc<Security>>,
    mut request: Request,
    next: Next,
) -> Response {
    if security.token.is_some() {
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let from_cookie = cookie(request.headers(), TOKEN_COOKIE);
        let allowed = bearer.is_some_and(|t| security.token_matches(t))
            || from_cookie.is_some_and(|t| security.token_matches(t));
        if !allowed {
            // `?token=` once: kept in a cookie, and the URL loses it.
            if let Some(given) = query_token(&request).filter(|t| security.token_matches(t)) {
                if given.bytes().all(|b| b.is_ascii_graphic() && b != b';') {
                    let mut response = Redirect::to(request.uri().path()).into_response();
                    response
                        .headers_mut()
                        .append(header::SET_COOKIE, set_cookie(TOKEN_COOKIE, &given));
                    return with_safety_headers(response);
                }
            }
            let response = (
                StatusCode::UNAUTHORIZED,
                "queue-web needs its token: open /?token=<token> once, or send Authorization: Bearer <token>\n",
            )
                .into_response();
            return with_safety_headers(response);
        }
    }
    if security.read_only && request.method() != Method::GET && request.method() != Method::HEAD {
        let refused = Failure::Forbidden("queue-web runs --read-only: no actions".into());
        return with_safety_headers(refused.into_response());
    }
    let existing = cookie(request.headers(), SESSION_COOKIE)
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string);
    let is_new = existing.is_none();
    let session = Session(existing.unwrap_or_else(|| {
        let mut bytes = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut bytes);
        hex::encode(bytes)
    }));
    request.extensions_mut().insert(session.clone());
    let mut response = next.run(request).await;
    if is_new {
        response
            .headers_mut()
            .append(header::SET_COOKIE, set_cookie(SESSION_COOKIE, &session.0));
    }
    with_safety_headers(response)
}

pub fn with_safety_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let fixed = [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // same-origin, not no-referrer: under no-referrer a browser sends
        // `Origin: null` with the pages' own forms, which hosts.rs refuses
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}
