//! The connection string as the start-up line and the pages' header show
//! it: rebuilt from what tokio-postgres parsed (the parser that connects),
//! never cut out of the string, so that however a password is written (a
//! `/`, `?`, `@` or `%` in it, quoted or not) what is shown cannot hold it.

use tokio_postgres::config::Host;
use tokio_postgres::Config;

/// What is shown of a string that does not parse: nothing of it.
pub const UNPARSABLE: &str = "<unparsable connection string>";

/// `text` (a postgres:// URL or a key=value string) as key=value pairs of
/// its parsed parts, with `password=***` where it set one.
pub fn mask_password(text: &str) -> String {
    let Ok(config) = text.parse::<Config>() else {
        return UNPARSABLE.into();
    };
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|host| match host {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    // The URL parser ends the credentials at the first `@`: a host that
    // holds one is the rest of a password whose `@` was not escaped.
    if hosts.iter().any(|host| host.contains('@')) {
        return UNPARSABLE.into();
    }
    let list = |items: Vec<String>| Some(items.join(",")).filter(|joined| !joined.is_empty());
    let parts = [
        ("user", config.get_user().map(str::to_string)),
        ("password", config.get_password().map(|_| "***".to_string())),
        ("host", list(hosts)),
        (
            "hostaddr",
            list(
                config
                    .get_hostaddrs()
                    .iter()
                    .map(|a| a.to_string())
                    .collect(),
            ),
        ),
        (
            "port",
            list(config.get_ports().iter().map(|p| p.to_string()).collect()),
        ),
        ("dbname", config.get_dbname().map(str::to_string)),
        (
            "application_name",
            config.get_application_name().map(str::to_string),
        ),
        ("options", config.get_options().map(str::to_string)),
    ];
    parts
        .into_iter()
        .filter_map(|(key, value)| Some(format!("{key}={}", quoted(&value?))))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A value as a key=value string writes it: in quotes, with `\` escapes,
/// when it is empty or holds a space, a quote or a backslash.
fn quoted(value: &str) -> String {
    if !value.is_empty() && !value.contains(|c: char| c.is_whitespace() || c == '\'' || c == '\\') {
        return value.to_string();
    }
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

#[cfg(test)]
mod tests {
    use super::{mask_password, UNPARSABLE};

    /// `text` parses, shows `password=***` and none of `secret`'s pieces.
    fn hidden(text: &str, secret: &[&str], shown: &str) {
        let masked = mask_password(text);
        assert_eq!(masked, shown, "{text}");
        for piece in secret {
            assert!(!masked.contains(piece), "{piece:?} shown: {masked}");
        }
    }

    #[test]
    fn urls_lose_their_password_however_it_is_written() {
        hidden(
            "postgres://web:Zm9v/YmFy@db.example/app",
            &["Zm9v", "YmFy"],
            "user=web password=*** host=db.example port=5432 dbname=app",
        );
        hidden(
            "postgres://web:Zm9v?YmFy@db.example:5433/app?sslmode=disable",
            &["Zm9v", "YmFy"],
            "user=web password=*** host=db.example port=5433 dbname=app",
        );
        hidden(
            "postgresql://ada:s3cr%40t%2Fx%25y@db.example/app",
            &["s3cr", "%40", "t%2F"],
            "user=ada password=*** host=db.example port=5432 dbname=app",
        );
        // a raw `%` that escapes nothing, a space, quotes
        hidden(
            "postgres://ada:50%zz 'q\"@db.example/app",
            &["50%", "zz", "'q"],
            "user=ada password=*** host=db.example port=5432 dbname=app",
        );
        // in the query string, next to a socket directory
        hidden(
            "postgres://ada@/app?password=Zm9v/YmFy&host=/run/my%20socks&port=5432",
            &["Zm9v", "YmFy"],
            "user=ada password=*** host='/run/my socks' port=5432 dbname=app",
        );
        assert_eq!(
            mask_password("postgres:///app?host=/tmp&application_name=x"),
            "host=/tmp dbname=app application_name=x"
        );
    }

    #[test]
    fn a_raw_at_in_a_url_password_shows_nothing() {
        // the parser splits at the first `@`: "ss@host" would be a host
        for text in [
            "postgres://web:p@ss@db.example/app",
            "postgres://web:Zm9v/@YmFy@db.example/app",
        ] {
            assert_eq!(mask_password(text), UNPARSABLE, "{text}");
        }
    }

    #[test]
    fn key_values_lose_their_password_however_it_is_written() {
        hidden(
            "host=/tmp password=Zm9v/YmFy dbname=app",
            &["Zm9v", "YmFy"],
            "password=*** host=/tmp dbname=app",
        );
        hidden(
            "host=db password = 'a \\' se@cr?et/%41' user=ada",
            &["se@cr", "et/", "%41", "a \\'"],
            "user=ada password=*** host=db",
        );
        hidden(
            "user='ada lovelace' password=\"quoted\" dbname=app options='-c x=1'",
            &["quoted"],
            "user='ada lovelace' password=*** dbname=app options='-c x=1'",
        );
        assert_eq!(
            mask_password("user=password dbname=app"),
            "user=password dbname=app"
        );
    }

    #[test]
    fn what_does_not_parse_shows_nothing() {
        for text in [
            "host=db password='unterminated",
            "postgres://web:pw@db.example:notaport/app",
            "just some words",
        ] {
            assert_eq!(mask_password(text), UNPARSABLE, "{text}");
        }
    }
}
