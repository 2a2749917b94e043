//! What a page shows of a webhook's URL. Services put the secret in the
//! path (Slack's `/services/T000/B000/XXXX`, Discord's
//! `/api/webhooks/123/token`, Zapier's `/hooks/catch/123/abc/`), so the
//! path is shown only as far as its segments are plain words, and the query
//! and fragment never are. The extension applies the same rule to
//! `queue_stats.sender`; this side does not count on it.

use url::Url;

/// What stands for the part not shown.
const HIDDEN: &str = "…";

/// Whether a path segment is shown: 1 to 24 characters, each a lowercase
/// ASCII letter, `-`, `_` or `.` (so no digit, capital or `%` escape,
/// which ids and tokens have).
fn plain(segment: &str) -> bool {
    (1..=24).contains(&segment.len())
        && segment
            .bytes()
            .all(|b| b.is_ascii_lowercase() || matches!(b, b'-' | b'_' | b'.'))
}

/// `text` as shown: scheme, host and port, then the path's segments up to
/// the first that is not plain, which with the rest becomes `/…`; a final
/// `/` is kept. Only `…` for what does not parse as a URL with a host.
pub fn shown(text: &str) -> String {
    let Ok(url) = Url::parse(text) else {
        return HIDDEN.into();
    };
    let Some(host) = url.host_str() else {
        return HIDDEN.into();
    };
    let mut shown = format!("{}://{host}", url.scheme());
    if let Some(port) = url.port() {
        shown.push_str(&format!(":{port}"));
    }
    let segments: Vec<&str> = url
        .path_segments()
        .map(Iterator::collect)
        .unwrap_or_default();
    for (i, segment) in segments.iter().enumerate() {
        shown.push('/');
        if plain(segment) {
            shown.push_str(segment);
        } else if !(segment.is_empty() && i + 1 == segments.len()) {
            shown.push_str(HIDDEN);
            break;
        }
    }
    shown
}

/// `text` with each http:// or https:// URL in it as `shown` gives it: the
/// webhook sender of queue_stats (`POST <url>`), and errors that name one.
pub fn shown_in(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = url_start(rest) {
        out.push_str(&rest[..at]);
        let len = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .unwrap_or(rest.len() - at);
        out.push_str(&shown(&rest[at..at + len]));
        rest = &rest[at + len..];
    }
    out.push_str(rest);
    out
}

/// Where the first http:// or https:// URL in `text` starts.
fn url_start(text: &str) -> Option<usize> {
    // (ASCII lowercasing keeps every byte where it was)
    let lower = text.to_ascii_lowercase();
    ["http://", "https://"]
        .iter()
        .filter_map(|scheme| lower.find(scheme))
        .min()
}

#[cfg(test)]
mod tests {
    use super::{shown, shown_in};

    #[test]
    fn the_path_is_shown_up_to_its_first_segment_that_is_not_a_plain_word() {
        for (url, expected) in [
            (
                "https://hooks.slack.com/services/T000/B000/XXXX",
                "https://hooks.slack.com/services/…",
            ),
            (
                "https://discord.com/api/webhooks/123/abc",
                "https://discord.com/api/webhooks/…",
            ),
            (
                "https://hooks.zapier.com/hooks/catch/123/abc/",
                "https://hooks.zapier.com/hooks/catch/…",
            ),
            (
                "https://api.example.com/hooks/orders?sig=1",
                "https://api.example.com/hooks/orders",
            ),
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
            (
                "https://x.example/in/orders/",
                "https://x.example/in/orders/",
            ),
            ("https://x.example/in#token", "https://x.example/in"),
            ("https://x.example/In/orders", "https://x.example/…"),
            ("https://x.example/in%41/orders", "https://x.example/…"),
            ("https://x.example/in//orders", "https://x.example/in/…"),
            ("https://x.example/v2/orders", "https://x.example/…"),
            (
                "https://x.example/abcdefghijklmnopqrstuvwx/y",
                "https://x.example/abcdefghijklmnopqrstuvwx/y",
            ),
            (
                "https://x.example/abcdefghijklmnopqrstuvwxy/y",
                "https://x.example/…",
            ),
            (
                "https://user:pw@x.example:8443/a",
                "https://x.example:8443/a",
            ),
            ("https://x.example:443/a", "https://x.example/a"),
            ("http://[::1]:9/in", "http://[::1]:9/in"),
            ("not a url", "…"),
        ] {
            assert_eq!(shown(url), expected, "{url}");
        }
    }

    #[test]
    fn urls_in_a_text_are_shown_by_the_same_rule() {
        assert_eq!(
            shown_in("POST https://hooks.slack.com/services/T000/B000/XXXX"),
            "POST https://hooks.slack.com/services/…"
        );
        assert_eq!(
            shown_in(
                "POST HTTPS://discord.com/api/webhooks/1/t is not allowed by queue.webhook_allow"
            ),
            "POST https://discord.com/api/webhooks/… is not allowed by queue.webhook_allow"
        );
        assert_eq!(
            shown_in("a http://a.example/x/1 and \"https://b.example/y?k=v\""),
            "a http://a.example/x/… and \"https://b.example/y\""
        );
        assert_eq!(shown_in("public.deliver(jsonb)"), "public.deliver(jsonb)");
        assert_eq!(shown_in("cut short: https://"), "cut short: …");
    }
}
