//! A dead letter's cause: its last error with what changes from one job to
//! the next taken out (numbers, ids, times, addresses), so that the failures
//! of one kind fall into one group (pages/dead.rs).

use std::sync::LazyLock;

use regex::{Captures, Regex};
use sha2::{Digest, Sha256};

/// The longest cause kept: past it, errors that begin alike are one cause.
const LONGEST: usize = 300;

/// What each kind of varying part becomes, in the order they are taken out:
/// the wider forms first (a URL holds a host that may be an address, a
/// time holds numbers).
static RULES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // a URL keeps its scheme and host: which endpoint failed is a cause
        (
            r"(?i)\b([a-z][a-z0-9+.-]*://)(?:[^\s/?#@]*@)?([^\s/?#<>'\x22]+)[^\s<>'\x22]*",
            "$1$2/…",
        ),
        (
            r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
            "<uuid>",
        ),
        (r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", "<email>"),
        (
            r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?",
            "<time>",
        ),
        (r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", "<ip>"),
        (r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b", "<time>"),
        (r"\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\](?::\d+)?", "<ip>"),
    ]
    .into_iter()
    .map(|(pattern, replacement)| (Regex::new(pattern).expect("a valid pattern"), replacement))
    .collect()
});

/// An IPv6 address (or a MAC address) without brackets; taken out only
/// when it has a digit, so that `cafe::face` stays a path.
static IPV6: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}\b|\b(?:[0-9A-Fa-f]{1,4}:)+:[0-9A-Fa-f]{0,4}\b",
    )
    .expect("a valid pattern")
});

/// A word with a digit in it: a number, or an id when letters come with it.
static WORD_WITH_DIGIT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[\w-]*\d[\w-]*\b").expect("a valid pattern"));

/// A number, or an id: a word of at least 8 characters that mixes letters
/// and digits (`ch_3MqL9x2eZvKYlo2C`, `a1b2c3d4`), or a hex number. Shorter
/// words keep their letters (`utf8`, `sha256`, `v2`), their digits going.
fn number_or_id(word: &Captures) -> String {
    let word = &word[0];
    let digits = word.bytes().filter(u8::is_ascii_digit).count();
    if digits == word.len() {
        "<n>".into()
    } else if word.len() >= 8 || word.starts_with("0x") {
        "<id>".into()
    } else {
        word.chars().fold(String::new(), |mut kept, c| {
            if !c.is_ascii_digit() {
                kept.push(c);
            } else if !kept.ends_with('#') {
                kept.push('#');
            }
            kept
        })
    }
}

/// The cause of a failure whose last error is `error`.
pub fn cause(error: &str) -> String {
    let mut text = error.trim().to_string();
    for (rule, replacement) in RULES.iter() {
        if rule.is_match(&text) {
            text = rule.replace_all(&text, *replacement).into_owned();
        }
    }
    let text = IPV6.replace_all(&text, |found: &Captures| {
        if found[0].bytes().any(|b| b.is_ascii_digit()) {
            "<ip>".to_string()
        } else {
            found[0].to_string()
        }
    });
    let mut text = WORD_WITH_DIGIT
        .replace_all(&text, number_or_id)
        .into_owned();
    if text.chars().count() > LONGEST {
        text = text.chars().take(LONGEST).collect::<String>() + "…";
    }
    text
}

/// A short name for a cause in links, so that a link carries no error text
/// (and a crafted one cannot put words on a page): the first 16 hex digits
/// of its SHA-256.
pub fn cause_id(cause: &str) -> String {
    hex::encode(&Sha256::digest(cause.as_bytes())[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_ids_and_addresses_are_taken_out() {
        for (error, expected) in [
            (
                "SMTP 550: mailbox unavailable",
                "SMTP <n>: mailbox unavailable",
            ),
            ("timeout after 30 s", "timeout after <n> s"),
            (
                "HTTP 503 Service Unavailable: upstream 10.0.3.7:8080 down",
                "HTTP <n> Service Unavailable: upstream <ip> down",
            ),
            (
                "POST https://api.example.com/v1/charges/ch_3MqL9x2e?key=s3cret failed",
                "POST https://api.example.com/… failed",
            ),
            (
                "connection to http://127.0.0.1:9/hook refused",
                "connection to http://<ip>/… refused",
            ),
            (
                "order 7f9c2d1e-8a4b-4c3d-9e2f-1a2b3c4d5e6f not found",
                "order <uuid> not found",
            ),
            ("no user alice.smith+test@example.co.uk", "no user <email>"),
            (
                "charge ch_3MqL9x2eZvKYlo2C declined",
                "charge <id> declined",
            ),
            ("bad digest 0xdeadbeef", "bad digest <id>"),
            (
                "at 2024-05-01T12:30:45.123Z, again 2024-05-01 13:00:00+02",
                "at <time>, again <time>",
            ),
            ("retry at 12:30:45", "retry at <time>"),
            ("dial [2001:db8::1]:443: refused", "dial <ip>: refused"),
            ("dial 2001:db8::1 refused", "dial <ip> refused"),
            (
                "utf8 and sha256 and v2 keep their letters",
                "utf# and sha# and v# keep their letters",
            ),
            ("job 123 of customer-7", "job <n> of <id>"),
            ("cafe::face and 00:1a:2b:3c:4d:5e", "cafe::face and <ip>"),
            ("  trimmed  ", "trimmed"),
            ("std::io::Error: broken pipe", "std::io::Error: broken pipe"),
        ] {
            assert_eq!(cause(error), expected, "{error}");
        }
    }

    #[test]
    fn failures_of_one_kind_share_a_cause_and_others_do_not() {
        let a = cause("SMTP 550: mailbox user17@example.com unavailable (job 4411)");
        let b = cause("SMTP 550: mailbox bob@example.org unavailable (job 9)");
        let c = cause("SMTP 421: try again later");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(cause_id(&a), cause_id(&b));
        assert_ne!(cause_id(&a), cause_id(&c));
        assert_eq!(cause_id(&a).len(), 16);
    }

    #[test]
    fn a_long_error_is_cut() {
        let long = "x".repeat(1000);
        assert_eq!(cause(&long).chars().count(), LONGEST + 1);
    }
}
