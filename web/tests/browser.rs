//! The main paths in a real browser, headless Chromium (Debian's package):
//! the cluster page, a queue, its dead letter, retry it, see it pending;
//! then purge the queue's dead letters through the confirmation page. And
//! a bad night: the cluster page reloads on its own and says what is stuck;
//! the dead letters by cause, some of one cause retried and all of another
//! purged; a stuck group let go. Screenshots of each step are kept in
//! target/queue-web-screenshots/.

mod common;

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{cluster, url, Web, DB};
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::{Browser, LaunchOptions, Tab};

const CHROMIUM: &str = "/usr/bin/chromium";

fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("queue-web-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn screenshot(tab: &Tab, name: &str) {
    eprintln!("screenshot of {} kept as {name}", tab.get_url());
    let png = tab
        .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
        .unwrap();
    std::fs::write(screenshots().join(name), png).unwrap();
}

fn text_of(tab: &Tab, selector: &str) -> String {
    tab.wait_for_element(selector)
        .unwrap()
        .get_inner_text()
        .unwrap()
}

/// Clicks the element, and waits until the tab is at a URL containing
/// `next` (a page's elements are then found as they appear). The pages
/// refresh themselves: a click on a link that lands while its page reloads
/// is lost, as a user's would be, so a link (a GET, harmless to follow
/// twice) is clicked again on the reloaded page; a button is clicked once.
fn click(tab: &Tab, selector: &str, next: &str) {
    let before = tab.get_url();
    let link = selector.starts_with("a[");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut clicked = false;
    loop {
        if !clicked || link {
            if let Ok(element) = tab.wait_for_element(selector) {
                // an element of the page being replaced may refuse the click
                clicked = element.click().is_ok() || clicked;
            }
        }
        let retry_at = Instant::now() + Duration::from_secs(3);
        while Instant::now() < retry_at {
            let url = tab.get_url();
            if url != before && url.contains(next) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            Instant::now() < deadline,
            "{selector} led to {}, not {next}",
            tab.get_url()
        );
    }
}

/// A fresh Chromium profile directory, removed afterwards, also when the
/// test fails.
struct Profile(PathBuf);

impl Profile {
    fn new() -> Profile {
        let dir = std::env::temp_dir().join(format!("queue-web-chromium-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Profile(dir)
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        // (Chromium's helper processes may still write into it as they end)
        for _ in 0..10 {
            let _ = std::fs::remove_dir_all(&self.0);
            std::thread::sleep(Duration::from_millis(200));
            if !self.0.exists() {
                break;
            }
        }
    }
}

/// Headless Chromium with a fresh profile.
fn chromium(profile: &Profile) -> Browser {
    assert!(
        std::path::Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: make setup installs Debian's chromium"
    );
    let args = [
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ];
    Browser::new(
        LaunchOptions::default_builder()
            .path(Some(PathBuf::from(CHROMIUM)))
            .headless(true)
            .sandbox(false)
            .user_data_dir(Some(profile.0.clone()))
            .window_size(Some((1280, 900)))
            .args(args.iter().map(OsStr::new).collect())
            .idle_browser_timeout(Duration::from_secs(120))
            .build()
            .unwrap(),
    )
    .expect("Chromium starts")
}

#[test]
fn retry_a_dead_letter_in_a_browser() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    // (each statement in a transaction of its own, as producers and consumers run)
    for statement in [
        "SELECT queue_create('emails', max_attempts => 1)",
        "SELECT queue_create('reports')",
        "SELECT queue_enqueue('emails', jsonb_build_object('to', 'user' || i || '@example.com'))
           FROM generate_series(1, 40) i",
        "SELECT queue_enqueue('emails', '{\"to\": \"<script>document.title=1</script>\"}',
                              headers => '{\"trace\": \"abc-123\"}', priority => 10,
                              dedup_key => 'the-dead-letter')",
        "SELECT queue_fail(c.id, c.lease, 'SMTP 550: <mailbox unavailable>')
           FROM queue_claim('emails', 'mailer-1', 3) c",
        "SELECT queue_enqueue('reports', '{}', delay => '1 hour')",
    ] {
        db.batch_execute(statement).unwrap();
    }
    let mut other = cluster.connect_to("tenant2");
    other
        .batch_execute(
            "SELECT queue_create('invoices'); SELECT queue_enqueue('invoices', '{}') FROM generate_series(1, 7);",
        )
        .unwrap();
    let web = Web::start(&url(&cluster, "postgres", DB), &["--sample-interval", "1"]);

    let profile = Profile::new();
    let browser = chromium(&profile);
    let tab = browser.new_tab().unwrap();
    tab.set_default_timeout(Duration::from_secs(30));

    // the cluster page: both databases and their queues
    tab.navigate_to(&format!("{}/", web.base)).unwrap();
    tab.wait_until_navigated().unwrap();
    let body = text_of(&tab, "main");
    assert!(
        body.contains("2 databases with the queue extension"),
        "{body}"
    );
    assert!(
        body.contains("invoices") && body.contains("emails"),
        "{body}"
    );
    // (a second reading a moment later gives the queue page's chart two samples)
    std::thread::sleep(Duration::from_millis(1500));
    tab.navigate_to(&format!("{}/", web.base)).unwrap();
    tab.wait_until_navigated().unwrap();
    screenshot(&tab, "1-cluster.png");

    // some minutes' worth of work in a few seconds, for the charts to draw
    for round in 0..8 {
        let enqueue = format!(
            "SELECT queue_enqueue_batch('emails', array_fill('{{}}'::jsonb, ARRAY[{}]))",
            10 + (round % 4) * 15
        );
        db.batch_execute(&enqueue).unwrap();
        db.batch_execute(
            "SELECT queue_complete(c.id, c.lease) FROM queue_claim('emails', 'w', 25) c",
        )
        .unwrap();
        db.batch_execute(
            "SELECT queue_fail(c.id, c.lease, 'timeout') FROM queue_claim('emails', 'w', 2) c",
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(700));
    }
    let dead: i64 = db
        .query_one(
            "SELECT id FROM queue_jobs WHERE dedup_key = 'the-dead-letter'",
            &[],
        )
        .unwrap()
        .get(0);

    // a queue
    click(
        &tab,
        "a[href='/db/queue_test/queue/emails']",
        "/queue/emails",
    );
    assert!(text_of(&tab, "h1").contains("Queue emails"));
    screenshot(&tab, "2-queue.png");

    // its dead letters, then one of them: payload, headers and error as text
    click(&tab, "a.bad", "status=failed");
    assert!(text_of(&tab, "h1").contains("Jobs of emails: failed"));
    let link = format!("table a[href='/db/queue_test/job/{dead}']");
    click(&tab, &link, "/job/");
    assert_eq!(text_of(&tab, "#status"), "failed");
    assert_eq!(
        text_of(&tab, "#last-error"),
        "SMTP 550: <mailbox unavailable>"
    );
    assert!(text_of(&tab, "#headers").contains("abc-123"));
    screenshot(&tab, "3-dead-letter.png");
    let title = tab.get_title().unwrap();
    assert!(title.contains("queue-web"), "no script ran: {title}");

    // retry it: pending
    click(&tab, "#retry", "done=retried");
    assert!(text_of(&tab, "#note").contains("Retried"));
    assert_eq!(text_of(&tab, "#status"), "pending");
    screenshot(&tab, "4-retried.png");

    let id: i64 = tab
        .get_url()
        .rsplit('/')
        .next()
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let status: String = db
        .query_one("SELECT status FROM queue_job($1)", &[&id])
        .unwrap()
        .get(0);
    assert_eq!(status, "pending");

    // purge the queue's dead letters: no status is chosen until one is,
    // and a page of its own says how many before anything is deleted
    let mut failed = || -> i64 {
        db.query_one("SELECT failed FROM queue_stats WHERE queue = 'emails'", &[])
            .unwrap()
            .get(0)
    };
    let before = failed();
    assert!(before > 0);
    // (the page without its reload, which would undo the choice in the menu)
    tab.navigate_to(&format!(
        "{}/db/queue_test/queue/emails?refresh=off",
        web.base
    ))
    .unwrap();
    tab.wait_until_navigated().unwrap();
    let select = tab.wait_for_element("select[name=status]").unwrap();
    select.focus().unwrap();
    tab.type_str("failed").unwrap();
    click(&tab, "#purge", "/purge?status=failed");
    let what = text_of(&tab, "#what");
    assert!(
        what.contains(&format!(
            "This deletes the {before} failed jobs of queue emails"
        )),
        "{what}"
    );
    assert_eq!(failed(), before, "asking deletes nothing");
    screenshot(&tab, "5-purge-confirm.png");
    click(&tab, "#confirm", "done=purged");
    let note = text_of(&tab, "#note");
    assert!(note.contains(&format!("Purged {before} jobs.")), "{note}");
    assert_eq!(failed(), 0);
    screenshot(&tab, "6-purged.png");
}

/// Opens `path` and waits until the page's main text holds `wanted`.
fn open(tab: &Tab, base: &str, path: &str, wanted: &str) -> String {
    tab.navigate_to(&format!("{base}{path}")).unwrap();
    tab.wait_until_navigated().unwrap();
    let body = text_of(tab, "main");
    assert!(
        body.contains(wanted),
        "{path} does not say {wanted:?}: {body}"
    );
    body
}

#[test]
fn triage_dead_letters_and_let_a_stuck_group_go_in_a_browser() {
    let cluster = cluster(&[]);
    // three dead letters of the same cause in another database, first
    cluster
        .connect_to("tenant2")
        .batch_execute(
            "SELECT queue_create('notify', max_attempts => 1);
             SELECT queue_enqueue('notify', jsonb_build_object('to', 'ops' || i || '@example.org'))
               FROM generate_series(1, 3) i;
             SELECT queue_fail(c.id, c.lease, 'SMTP 550: mailbox ' || (c.payload->>'to') || ' unavailable')
               FROM queue_claim('notify', 'mailer-9', 3) c;",
        )
        .unwrap();
    let mut db = cluster.connect();
    for statement in [
        // a queue nobody takes from, and a paused one with due jobs
        "SELECT queue_create('reports')",
        "SELECT queue_enqueue('reports', '{}') FROM generate_series(1, 5)",
        "SELECT queue_create('exports')",
        "SELECT queue_enqueue('exports', '{}') FROM generate_series(1, 2)",
        "SELECT queue_pause('exports')",
        "SELECT queue_create('mail', max_attempts => 1)",
        "SELECT queue_enqueue('mail', jsonb_build_object('to', 'user' || i || '@example.com'))
           FROM generate_series(1, 12) i",
        "SELECT queue_fail(c.id, c.lease, 'SMTP 550: mailbox ' || (c.payload->>'to') || ' unavailable')
           FROM queue_claim('mail', 'mailer-1', 8) c",
        "SELECT queue_fail(c.id, c.lease, 'connect to 10.0.0.' || c.id || ':25 timed out after 30 s')
           FROM queue_claim('mail', 'mailer-2', 4) c",
        "SELECT queue_create('orders', ordered => true)",
        "SELECT queue_enqueue('orders', jsonb_build_object('order', i), group_key => 'customer-7')
           FROM generate_series(1, 4) i",
    ] {
        db.batch_execute(statement).unwrap();
    }
    // customer-7's head fails and waits an hour for its retry
    let head: i64 = db
        .query_one(
            "SELECT c.id FROM queue_claim('orders', 'billing-1', 1) c,
                    queue_fail(c.id, c.lease, 'card declined: insufficient funds (order ' || c.id || ')',
                               retry_in => '1 hour') f",
            &[],
        )
        .unwrap()
        .get(0);
    let web = Web::start(&url(&cluster, "postgres", DB), &["--sample-interval", "1"]);
    let profile = Profile::new();
    let browser = chromium(&profile);
    let tab = browser.new_tab().unwrap();
    tab.set_default_timeout(Duration::from_secs(30));

    // the cluster page reloads on its own (a meta refresh, no script): a
    // queue created after it was opened appears
    open(&tab, &web.base, "/", "What is stuck");
    db.batch_execute("SELECT queue_create('arrived_later')")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    // (read as it reloads: a read that meets the page between two loads is
    // tried again)
    while !tab
        .find_element("main")
        .and_then(|main| main.get_inner_text())
        .is_ok_and(|text| text.contains("arrived_later"))
    {
        assert!(
            Instant::now() < deadline,
            "the page did not reload on its own"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let title = tab.get_title().unwrap();
    assert!(title.contains("queue-web"), "no script ran: {title}");

    // what is stuck: customer-7, waiting on its failing head; a queue
    // nobody takes from (once six readings show nothing moved), a paused one
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let body = open(
            &tab,
            &web.base,
            "/",
            "Group customer-7 of queue_test › orders",
        );
        if body.contains("no consumer is seen") {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "no queue nobody takes from: {body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        body.contains("Queue queue_test › reports: 5 jobs due"),
        "{body}"
    );
    assert!(
        body.contains("Queue queue_test › exports: 2 jobs due"),
        "{body}"
    );
    assert!(body.contains("and the queue is paused"), "{body}");
    assert!(
        body.contains(&format!(
            "waits on its head, job {head}, which failed 1 of 5 attempts"
        )),
        "{body}"
    );
    assert!(
        body.contains("Last error: card declined: insufficient funds"),
        "{body}"
    );
    screenshot(&tab, "7-stuck.png");

    // the dead letters by cause, cluster-wide
    click(&tab, "#dead-link", "/dead");
    let causes = text_of(&tab, "#causes");
    assert!(
        causes.contains("SMTP <n>: mailbox <email> unavailable"),
        "{causes}"
    );
    assert!(
        causes.contains("connect to <ip> timed out after <n> s"),
        "{causes}"
    );
    assert!(
        causes.contains("queue_test › mail 8") && causes.contains("tenant2 › notify 3"),
        "{causes}"
    );
    screenshot(&tab, "8-dead-letters.png");

    // one cause: tick two of its jobs, retry them
    click(&tab, "#causes tr.cause a[href^='/dead?cause=']", "?cause=");
    assert_eq!(text_of(&tab, "#cause-count"), "11");
    let boxes = tab.find_elements("input[name=job]").unwrap();
    assert_eq!(boxes.len(), 11);
    // (the list is by database: the first two are queue_test's)
    let picked: Vec<i64> = boxes[..2]
        .iter()
        .map(|b| {
            let value = b.get_attribute_value("value").unwrap().unwrap();
            let (db, id) = value.rsplit_once(':').unwrap();
            assert_eq!(db, DB);
            id.parse().unwrap()
        })
        .collect();
    for b in &boxes[..2] {
        b.click().unwrap();
    }
    screenshot(&tab, "9-cause.png");
    click(&tab, "#retry-chosen", "/dead/retry?");
    let what = text_of(&tab, "#what");
    assert!(
        what.contains("This retries the 2 dead letters you chose"),
        "{what}"
    );
    let status = |db: &mut common::Client, id: i64| -> String {
        db.query_one("SELECT status FROM queue_job($1)", &[&id])
            .unwrap()
            .get(0)
    };
    assert_eq!(
        status(&mut db, picked[0]),
        "failed",
        "asking retries nothing"
    );
    screenshot(&tab, "10-retry-chosen.png");
    click(&tab, "#confirm", "done=retried-many");
    assert!(text_of(&tab, "#note").contains("Retried 2 dead letters"));
    for id in &picked {
        assert_eq!(status(&mut db, *id), "pending");
    }

    // the other cause: purge all of it
    let timeouts = |db: &mut common::Client| -> i64 {
        db.query_one(
            "SELECT count(*) FROM queue_failed WHERE last_error LIKE 'connect to %'",
            &[],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(timeouts(&mut db), 4);
    open(&tab, &web.base, "/dead", "connect to <ip>");
    let link = tab
        .find_elements("#causes tr.cause a[href^='/dead?cause=']")
        .unwrap()
        .into_iter()
        .find(|a| a.get_inner_text().unwrap().starts_with("connect to"))
        .expect("the timeouts' cause");
    let href = link.get_attribute_value("href").unwrap().unwrap();
    click(&tab, &format!("a[href='{href}']"), "?cause=");
    click(&tab, "#purge-all", "/dead/purge?");
    let what = text_of(&tab, "#what");
    assert!(
        what.contains("This deletes the 4 dead letters, whose cause is"),
        "{what}"
    );
    click(&tab, "#confirm", "done=purged-many");
    assert!(text_of(&tab, "#note").contains("Purged 4 dead letters."));
    assert_eq!(timeouts(&mut db), 0);

    // let the stuck group go: a page says what it ends, then the group
    // moves on and the line is gone
    open(&tab, &web.base, "/?refresh=off", "Group customer-7");
    click(&tab, "button.let-go", "/let-go");
    let what = text_of(&tab, "#what");
    assert!(
        what.contains(&format!(
            "Job {head} is pending, the head of group customer-7"
        )),
        "{what}"
    );
    screenshot(&tab, "11-let-go.png");
    click(&tab, "#confirm", "done=let-go");
    assert!(text_of(&tab, "#note").contains(&format!("Let go: job {head} is cancelled")));
    let body = text_of(&tab, "main");
    assert!(!body.contains("Group customer-7"), "{body}");
    assert_eq!(status(&mut db, head), "cancelled");
    screenshot(&tab, "12-released.png");
}
