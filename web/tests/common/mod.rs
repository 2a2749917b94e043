//! queue-web started against a cluster of the client tests' harness, and a
//! small HTTP client that keeps its cookies, as a browser would.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

#[allow(unused_imports)]
pub use queue_client_tests::{Client, Cluster, DB};

/// A running queue-web, stopped when dropped.
pub struct Web {
    child: Child,
    pub base: String,
    /// The line it printed first, which says where it listens.
    pub first_line: String,
}

/// The connection URL of `user` to `db` in `cluster` (its Unix socket).
pub fn url(cluster: &Cluster, user: &str, db: &str) -> String {
    format!(
        "postgres://{user}@/{db}?host={}&port=5432",
        cluster.socket_dir().display()
    )
}

impl Web {
    /// queue-web on a free port of 127.0.0.1, with `args` added.
    pub fn start(url: &str, args: &[&str]) -> Web {
        let mut command = Command::new(env!("CARGO_BIN_EXE_queue-web"));
        command
            .args(["--database-url", url, "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("QUEUE_WEB_TOKEN");
        Web::start_command(command)
    }

    /// queue-web as `command` says, reading where it listens.
    pub fn start_command(mut command: Command) -> Web {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("queue-web starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("queue-web says where it listens: {line:?}"))
            .trim_end_matches('/')
            .to_string();
        Web {
            child,
            base,
            first_line: line,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.base.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// A new browser-like session.
    pub fn session(&self) -> Session {
        Session {
            base: self.base.clone(),
            http: reqwest::blocking::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: BTreeMap::new(),
            bearer: None,
        }
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Page {
    pub status: u16,
    pub location: Option<String>,
    pub html: String,
}

impl Page {
    /// The page's text with the escapes undone, to look for what it shows.
    pub fn text(&self) -> String {
        self.html
            .replace("&#x2f;", "/")
            .replace("&quot;", "\"")
            .replace("&#x27;", "'")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    }

    /// The page's text as a reader sees it: without its tags, each run of
    /// white space one space.
    pub fn words(&self) -> String {
        let mut words = String::new();
        let mut in_tag = false;
        for c in self.text().chars() {
            match c {
                '<' => in_tag = true,
                '>' if in_tag => in_tag = false,
                _ if in_tag => {}
                c if c.is_whitespace() => {
                    if !words.ends_with(' ') {
                        words.push(' ');
                    }
                }
                c => words.push(c),
            }
        }
        words
    }

    /// The value of the page's first CSRF field.
    pub fn csrf(&self) -> String {
        self.field("csrf")
    }

    /// The value of the page's first form field `name`.
    pub fn field(&self, name: &str) -> String {
        let marker = format!("name=\"{name}\" value=\"");
        let at = self
            .html
            .find(&marker)
            .unwrap_or_else(|| panic!("no field {name} in {}", self.text()));
        let rest = &self.html[at + marker.len()..];
        rest[..rest.find('"').unwrap()].to_string()
    }

    pub fn has_forms(&self) -> bool {
        self.html.contains("method=\"post\"")
    }
}

pub struct Session {
    base: String,
    http: reqwest::blocking::Client,
    cookies: BTreeMap<String, String>,
    pub bearer: Option<String>,
}

impl Session {
    fn send(&mut self, request: reqwest::blocking::RequestBuilder) -> Page {
        let mut request = request;
        if !self.cookies.is_empty() {
            let cookie: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            request = request.header("cookie", cookie.join("; "));
        }
        if let Some(token) = &self.bearer {
            request = request.bearer_auth(token);
        }
        let response = request.send().expect("queue-web answers");
        for value in response.headers().get_all("set-cookie") {
            let pair = value.to_str().unwrap().split(';').next().unwrap();
            let (k, v) = pair.split_once('=').unwrap();
            self.cookies.insert(k.to_string(), v.to_string());
        }
        Page {
            status: response.status().as_u16(),
            location: response
                .headers()
                .get("location")
                .map(|v| v.to_str().unwrap().to_string()),
            html: response.text().unwrap(),
        }
    }

    pub fn get(&mut self, path: &str) -> Page {
        self.get_with(path, &[])
    }

    /// GET with `headers` added (or, for Host, replaced).
    pub fn get_with(&mut self, path: &str, headers: &[(&str, &str)]) -> Page {
        let mut request = self.http.get(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request)
    }

    /// POST `form` from one of queue-web's own pages, as a browser sends
    /// it: with the page's Origin.
    pub fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let origin = self.base.clone();
        self.post_with(path, form, &[("origin", &origin)])
    }

    /// POST `form` with `headers` only (no Origin unless among them).
    pub fn post_with(
        &mut self,
        path: &str,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Page {
        let mut request = self.http.post(format!("{}{path}", self.base)).form(form);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request)
    }

    /// GET `path` and follow the redirect a POST answered with.
    pub fn follow(&mut self, page: &Page) -> Page {
        assert_eq!(page.status, 303, "a redirect: {}", page.text());
        let to = page.location.clone().unwrap();
        self.get(&to)
    }

    pub fn forget_cookies(&mut self) {
        self.cookies.clear();
    }
}

/// A cluster with the extension in DB, a second tenant database `tenant2`,
/// and a database `plain` without it.
pub fn cluster(settings: &[&str]) -> Cluster {
    let cluster = Cluster::start_with(settings);
    cluster.create_database("tenant2", "CREATE EXTENSION queue");
    cluster.create_database("plain", "");
    cluster
}
