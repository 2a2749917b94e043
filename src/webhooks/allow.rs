//! `queue.webhook_allow`: which endpoints webhooks may reach, matched on the
//! parsed URL (scheme, host, port, and the path at a `/` boundary), never as
//! a string prefix. Pure, unit-tested.

use std::net::IpAddr;

use url::Url;

/// The entries of an allow list (comma-separated URLs); an entry that is
/// not an absolute http(s) URL with a host is an error naming it.
pub fn parse(list: &str) -> Result<Vec<Url>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| match Url::parse(entry) {
            Ok(url) if is_http(&url) && url.host().is_some() => Ok(url),
            _ => Err(format!(
                "queue.webhook_allow entry \"{entry}\" is not an absolute http:// or https:// URL"
            )),
        })
        .collect()
}

fn is_http(url: &Url) -> bool {
    url.scheme() == "http" || url.scheme() == "https"
}

/// Whether `target` is allowed by one of `entries`: the same scheme, host
/// and port, and a path that is the entry's or goes on from it at a `/`.
pub fn allows(entries: &[Url], target: &Url) -> bool {
    entries.iter().any(|entry| {
        entry.scheme() == target.scheme()
            && entry.host() == target.host()
            && entry.port_or_known_default() == target.port_or_known_default()
            && path_within(entry.path(), target.path())
    })
}

fn path_within(entry: &str, target: &str) -> bool {
    let entry = entry.trim_end_matches('/');
    target == entry || target.starts_with(&format!("{entry}/"))
}

/// Whether a request may connect to `address` for a host named `host` (a
/// name, not an address: a URL whose host is an address literal is allowed
/// only by an entry naming it, and needs no resolving). Loopback, private
/// and link-local addresses are reached only through an entry that names
/// them literally, or `localhost` for loopback.
pub fn may_connect(host: &str, address: IpAddr) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return address.is_loopback();
    }
    !is_internal(address)
}

/// Loopback, private, link-local, unspecified (and the IPv6 forms of them).
fn is_internal(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                // 100.64.0.0/10, carrier-grade NAT: not public either
                || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
        }
    }
}

/// The URL as views and messages show it: its scheme, host and port, and
/// its path up to the first segment that is not a plain word (`word`),
/// then `…`; never its query string or fragment. Many endpoints keep their
/// secret in the path (Slack's `/services/T000/B000/XXXX`, Discord's
/// `/api/webhooks/<id>/<token>`), others in the query.
pub fn shown(url: &Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    let segments: Vec<&str> = url.path_segments().map_or(Vec::new(), Iterator::collect);
    let plain = segments.iter().take_while(|s| word(s)).count();
    if plain < segments.len() && !(plain + 1 == segments.len() && segments[plain].is_empty()) {
        let mut path: String = segments[..plain].iter().map(|s| format!("/{s}")).collect();
        path.push_str("/\u{2026}");
        shown.set_path(&path);
        // The ellipsis is put back, as set_path percent-encodes it.
        let text = shown.to_string();
        return text.replace("/%E2%80%A6", "/\u{2026}");
    }
    shown.to_string()
}

/// A path segment that is shown: 1 to 24 lowercase letters, `-`, `_` and
/// `.` (tokens and ids carry digits, capitals or escapes).
fn word(segment: &str) -> bool {
    (1..=24).contains(&segment.len())
        && segment
            .bytes()
            .all(|b| b.is_ascii_lowercase() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn allowed(list: &str, target: &str) -> bool {
        allows(&parse(list).unwrap(), &url(target))
    }

    #[test]
    fn a_shown_url_hides_what_may_be_secret() {
        let cases = [
            (
                "https://hooks.slack.com/services/T000/B000/XXXX",
                "https://hooks.slack.com/services/\u{2026}",
            ),
            (
                "https://discord.com/api/webhooks/123/abc",
                "https://discord.com/api/webhooks/\u{2026}",
            ),
            (
                "https://hooks.zapier.com/hooks/catch/123/abcdef/",
                "https://hooks.zapier.com/hooks/catch/\u{2026}",
            ),
            (
                "https://api.example.com/hooks/orders?sig=1#x",
                "https://api.example.com/hooks/orders",
            ),
            (
                "https://api.example.com/hooks/orders/",
                "https://api.example.com/hooks/orders/",
            ),
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
            (
                "https://example.com/in/Orders",
                "https://example.com/in/\u{2026}",
            ),
            (
                "https://example.com/a%20b/c",
                "https://example.com/\u{2026}",
            ),
            (
                "https://example.com/abcdefghijklmnopqrstuvwxy/c",
                "https://example.com/\u{2026}",
            ),
        ];
        for (given, expected) in cases {
            assert_eq!(shown(&url(given)), expected, "{given}");
        }
    }

    #[test]
    fn the_url_is_matched_by_its_parts() {
        let list = "https://hooks.example.com/in, http://127.0.0.1:8080";
        assert!(allowed(list, "https://hooks.example.com/in"));
        assert!(allowed(list, "https://hooks.example.com/in/orders?x=1"));
        assert!(allowed(list, "https://hooks.example.com:443/in"));
        assert!(allowed(list, "http://127.0.0.1:8080/anything"));
        // a look-alike host, another scheme, another port, a path that
        // only shares a prefix
        assert!(!allowed(list, "https://hooks.example.com.evil.net/in"));
        assert!(!allowed(list, "http://hooks.example.com/in"));
        assert!(!allowed(list, "https://hooks.example.com:8443/in"));
        assert!(!allowed(list, "https://hooks.example.com/inbox"));
        assert!(!allowed(list, "http://127.0.0.1:8081/"));
        assert!(!allowed("", "https://hooks.example.com/in"));
        // a whole host
        assert!(allowed(
            "https://hooks.example.com",
            "https://hooks.example.com/any/path"
        ));
        assert!(allowed(
            "https://hooks.example.com/",
            "https://hooks.example.com/"
        ));
    }

    #[test]
    fn a_bad_entry_is_named() {
        let error = parse("https://ok.example.com, ftp://files.example.com").unwrap_err();
        assert!(error.contains("ftp://files.example.com"), "{error}");
        assert!(parse("not a url").is_err());
    }

    #[test]
    fn names_never_reach_internal_addresses() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(may_connect("hooks.example.com", ip("93.184.215.14")));
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(
                !may_connect("hooks.example.com", ip(internal)),
                "{internal}"
            );
        }
        assert!(may_connect("localhost", ip("127.0.0.1")));
        assert!(may_connect("LOCALHOST", ip("::1")));
        assert!(!may_connect("localhost", ip("10.0.0.1")));
    }

    #[test]
    fn the_query_is_never_shown() {
        assert_eq!(
            shown(&url("https://hooks.example.com/in?token=secret#frag")),
            "https://hooks.example.com/in"
        );
    }
}
