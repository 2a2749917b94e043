//! Sending webhook requests without blocking the worker: a tokio runtime
//! whose threads run reqwest and never call into PostgreSQL. The worker's
//! main thread hands requests over (`send`) and picks the outcomes up
//! (`finished`) between its transactions; no transaction is open while
//! requests run, and a hung endpoint only occupies its own queue's
//! `max_in_flight`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicIsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::{Duration, SystemTime};

use pgrx::datum::Uuid;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::Url;

use super::allow;
use super::outcome::{self, Outcome};
use super::sign;
use crate::contract::WEBHOOK_RESULT_BODY_BYTES;

/// One request to send: a job's attempt.
pub struct Request {
    pub queue_id: i32,
    pub id: i64,
    pub lease: Uuid,
    pub url: Url,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub webhook_id: String,
    pub key: Option<Vec<u8>>,
    pub timeout: Duration,
}

/// The outcome of one request, for the job it was for.
pub struct Done {
    pub queue_id: i32,
    pub id: i64,
    pub lease: Uuid,
    pub outcome: Outcome,
}

/// How much of a response body is read: enough for last_error's
/// characters, whatever their width.
const BODY_BYTES: usize = outcome::BODY_CHARS * 4;

pub struct Dispatcher {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    /// queue.webhook_ca_file when `client` was built.
    ca_file: String,
    done_tx: mpsc::Sender<Done>,
    done_rx: mpsc::Receiver<Done>,
    /// An eventfd that a request's task writes once its outcome is sent,
    /// when the worker has a use for it: the worker waits on it beside its
    /// latch (never a PostgreSQL call from the runtime's threads).
    answered: Arc<OwnedFd>,
    /// The tasks' count of outcomes sent, less those the worker has taken
    /// (a task counts after sending, so right after the worker takes
    /// everything it is 0 or less). The task whose count is 1 (the first
    /// outcome since the worker last looked) writes the eventfd, and so does
    /// the one whose count is `wake_at`, the outcome that makes half of the
    /// requests open come back: two writes and wake-ups at most for a
    /// gathering of outcomes, not one each.
    unread: Arc<AtomicIsize>,
    wake_at: Arc<AtomicIsize>,
    /// Outcomes taken from the channel and not yet handed out, and when
    /// the first of them was taken.
    pending: Vec<Done>,
    pending_since: Option<std::time::Instant>,
    in_flight: HashMap<i32, usize>,
    /// The jobs whose requests are open: their leases, by job id.
    open: HashMap<i64, Uuid>,
}

impl Dispatcher {
    /// A runtime of one thread (a second one measured slower: the two
    /// contended with the worker's own for two cores; BENCHMARKS.md), and a
    /// client trusting the system's
    /// certificates and those of `ca_file` (empty: none).
    pub fn new(ca_file: &str) -> Result<Dispatcher, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("queue webhooks")
            .on_thread_start(crate::threads::block_signals)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the webhook runtime: {e}"))?;
        let (done_tx, done_rx) = mpsc::channel();
        // SAFETY: eventfd takes no pointer; a non-negative result is a new
        // descriptor that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(format!(
                "cannot start the webhook runtime: eventfd: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: fd is a descriptor just opened and owned by nothing else.
        let answered = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(Dispatcher {
            client: client(ca_file)?,
            ca_file: ca_file.to_string(),
            runtime,
            done_tx,
            done_rx,
            answered,
            unread: Arc::new(AtomicIsize::new(0)),
            wake_at: Arc::new(AtomicIsize::new(1)),
            pending: Vec::new(),
            pending_since: None,
            in_flight: HashMap::new(),
            open: HashMap::new(),
        })
    }

    /// Builds the client again if queue.webhook_ca_file changed.
    pub fn use_ca_file(&mut self, ca_file: &str) -> Result<(), String> {
        if ca_file != self.ca_file {
            self.client = client(ca_file)?;
            self.ca_file = ca_file.to_string();
        }
        Ok(())
    }

    pub fn in_flight(&self, queue_id: i32) -> usize {
        self.in_flight.get(&queue_id).copied().unwrap_or(0)
    }

    /// The queues with requests open (or whose outcomes are not handed out
    /// yet).
    pub fn queues_in_flight(&self) -> Vec<i32> {
        let open = self.in_flight.iter().filter(|(_, n)| **n > 0);
        open.map(|(queue_id, _)| *queue_id).collect()
    }

    pub fn any_in_flight(&self) -> bool {
        self.in_flight.values().any(|n| *n > 0)
    }

    /// Starts `request`; its outcome comes back through `finished`.
    pub fn send(&mut self, request: Request) {
        *self.in_flight.entry(request.queue_id).or_default() += 1;
        self.open.insert(request.id, request.lease);
        let client = self.client.clone();
        let done = self.done_tx.clone();
        let answered = self.answered.clone();
        let (unread, wake_at) = (self.unread.clone(), self.wake_at.clone());
        self.runtime.spawn(async move {
            let (queue_id, id, lease) = (request.queue_id, request.id, request.lease);
            let outcome = attempt(&client, request).await;
            // The worker may be gone: nothing to tell then.
            let _ = done.send(Done {
                queue_id,
                id,
                lease,
                outcome,
            });
            let count = unread.fetch_add(1, SeqCst) + 1;
            if count == 1 || count == wake_at.load(SeqCst) {
                signal(&answered);
            }
        });
    }

    /// The descriptor that becomes readable when an outcome has come in.
    pub fn answered_fd(&self) -> RawFd {
        self.answered.as_raw_fd()
    }

    /// Whether outcomes have come in that `finished` has not handed out.
    pub fn any_answered(&mut self) -> bool {
        loop {
            // Drained first: an outcome sent after that signals again.
            drain(&self.answered);
            let before = self.pending.len();
            self.pending.extend(self.done_rx.try_iter());
            self.unread
                .fetch_sub((self.pending.len() - before) as isize, SeqCst);
            // The next signal comes with the outcome for which record_in
            // records at once.
            let open: usize = self.in_flight.values().sum();
            let wanted = open.div_ceil(2).saturating_sub(self.pending.len()).max(1) as isize;
            self.wake_at.store(wanted, SeqCst);
            // A task that counted before that store compared its count
            // with the old mark: its outcome is taken here. (SeqCst on both
            // sides: either the task sees the new mark or this load sees
            // its count.)
            if self.unread.load(SeqCst) < wanted {
                break;
            }
        }
        if self.pending.is_empty() {
            return false;
        }
        self.pending_since
            .get_or_insert_with(std::time::Instant::now);
        true
    }

    /// When the outcomes in are worth a transaction: at once when they are
    /// half of the requests open or more, else once the first has waited
    /// `wait` (None: no outcome is in). Fewer, bigger transactions for a
    /// busy queue, at the cost of that wait.
    pub fn record_in(&mut self, wait: Duration) -> Option<Duration> {
        if !self.any_answered() {
            return None;
        }
        let open: usize = self.in_flight.values().sum();
        if self.pending.len() * 2 >= open {
            return Some(Duration::ZERO);
        }
        let waited = self.pending_since.map_or(wait, |since| since.elapsed());
        Some(wait.saturating_sub(waited))
    }

    /// The outcomes that have come in since the last call.
    pub fn finished(&mut self) -> Vec<Done> {
        self.any_answered();
        self.pending_since = None;
        let done = std::mem::take(&mut self.pending);
        for d in &done {
            if let Some(n) = self.in_flight.get_mut(&d.queue_id) {
                *n = n.saturating_sub(1);
            }
            self.open.remove(&d.id);
        }
        done
    }

    /// The jobs (id, lease) whose requests are still open, given up on:
    /// the worker is leaving without their outcomes.
    pub fn abandon(&mut self) -> Vec<(i64, Uuid)> {
        self.in_flight.clear();
        self.open.drain().collect()
    }
}

/// Makes the eventfd readable (adds 1 to its counter).
fn signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes the 8 bytes of a live u64 to a descriptor that the
    // Arc keeps open; a full counter (EAGAIN) is readable anyway.
    unsafe { libc::write(fd.as_raw_fd(), (&raw const one).cast(), 8) };
}

/// Resets the eventfd's counter (nothing to read is fine: non-blocking).
fn drain(fd: &OwnedFd) {
    let mut count: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live u64 from a descriptor
    // that the Arc keeps open.
    unsafe { libc::read(fd.as_raw_fd(), (&raw mut count).cast(), 8) };
}

fn client(ca_file: &str) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(std::sync::Arc::new(PublicOnly))
        .pool_idle_timeout(Duration::from_secs(60));
    if !ca_file.is_empty() {
        let pem = std::fs::read(ca_file)
            .map_err(|e| format!("cannot read queue.webhook_ca_file {ca_file}: {e}"))?;
        let certificates = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            format!("queue.webhook_ca_file {ca_file} holds no PEM certificate: {e}")
        })?;
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder
        .build()
        .map_err(|e| format!("cannot build the webhook client: {e}"))
}

/// Resolves host names to the addresses webhooks may reach: never a
/// loopback, private or link-local one (allow::may_connect), whatever the
/// allow list says of the name. (A URL whose host is an address literal is
/// not resolved: the allow list must name that address.)
struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| allow::may_connect(&host, a.ip()))
                .collect();
            if allowed.is_empty() && !found.is_empty() {
                return Err(format!(
                    "{host} resolves only to loopback, private or link-local addresses, which an allow-list entry must name literally"
                )
                .into());
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// One attempt: the request with its Standard Webhooks headers, and what
/// came of it.
async fn attempt(client: &reqwest::Client, request: Request) -> Outcome {
    let timestamp = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut builder = client
        .post(request.url.clone())
        .timeout(request.timeout)
        .header("content-type", "application/json")
        .header("webhook-id", &request.webhook_id)
        .header("webhook-timestamp", timestamp.to_string());
    if let Some(key) = &request.key {
        let signature = sign::signature(key, &request.webhook_id, timestamp, &request.body);
        builder = builder.header("webhook-signature", signature);
    }
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let response = match builder.body(request.body).send().await {
        Ok(response) => response,
        Err(e) => return outcome::of_error(describe(&e, request.timeout)),
    };
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // A 2xx body is the job's result, kept up to its limit; another's start
    // goes into last_error.
    let keep = if status.is_success() {
        WEBHOOK_RESULT_BODY_BYTES
    } else {
        BODY_BYTES
    };
    let (body, truncated) = read_start(response, keep).await;
    outcome::of_response(
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body,
        truncated,
        retry_after.as_deref(),
        SystemTime::now(),
    )
}

/// The first `keep` bytes of a response's body (the rest is never read),
/// and whether there was more.
async fn read_start(mut response: reqwest::Response, keep: usize) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    while body.len() <= keep {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    let truncated = body.len() > keep;
    body.truncate(keep);
    (body, truncated)
}

/// A request error as last_error says it: never the URL (its query may
/// carry a token) nor a header.
fn describe(error: &reqwest::Error, timeout: Duration) -> String {
    if error.is_timeout() {
        return format!("timeout after {} s", timeout.as_secs_f64());
    }
    let mut causes = Vec::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return "connection refused".to_string();
            }
        }
        causes.push(cause.to_string());
        source = cause.source();
    }
    let what = if error.is_connect() {
        "connection error"
    } else {
        "request error"
    };
    match causes.last() {
        Some(cause) => format!("{what}: {cause}"),
        None => what.to_string(),
    }
}
