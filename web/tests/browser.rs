//! The main path in a real browser, headless Chromium (Debian's package):
//! the cluster page, a queue, its dead letter, retry it, see it pending;
//! then purge the queue's dead letters through the confirmation page.
//! Screenshots of each step are kept in target/queue-web-screenshots/.

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
/// `next` (a page's elements are then found as they appear).
fn click(tab: &Tab, selector: &str, next: &str) {
    let before = tab.get_url();
    let element = tab.wait_for_element(selector).unwrap();
    element
        .click()
        .unwrap_or_else(|e| panic!("click on {selector} at {before}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let url = tab.get_url();
        if url != before && url.contains(next) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{selector} led to {url}, not {next}"
        );
        std::thread::sleep(Duration::from_millis(50));
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

#[test]
fn retry_a_dead_letter_in_a_browser() {
    assert!(
        std::path::Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: make setup installs Debian's chromium"
    );
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
    let args = [
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ];
    let browser = Browser::new(
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
    .expect("Chromium starts");
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
    click(
        &tab,
        "a[href='/db/queue_test/queue/emails']",
        "/queue/emails",
    );
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
