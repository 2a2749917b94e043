//! A connection string as it may be shown: its password replaced by `***`.

const MASK: &str = "***";

/// `url` (a postgres:// URL or a key=value string) without its password.
pub fn mask_password(url: &str) -> String {
    if let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    {
        let scheme = &url[..url.len() - rest.len()];
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let authority = match authority.rsplit_once('@') {
            Some((user_info, hosts)) => match user_info.split_once(':') {
                Some((user, _)) => format!("{user}:{MASK}@{hosts}"),
                None => authority.to_string(),
            },
            None => authority.to_string(),
        };
        format!("{scheme}{authority}{}", mask_query(tail))
    } else {
        mask_key_values(url)
    }
}

/// A URL's `?password=...` parameter.
fn mask_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}={MASK}"),
            _ => param.to_string(),
        })
        .collect();
    format!("{path}?{}", params.join("&"))
}

/// `password=secret` or `password = 'a secret'` in a key=value string.
fn mask_key_values(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = find_key(rest, "password") {
        out.push_str(&rest[..at]);
        let after_key = &rest[at + "password".len()..];
        let after_eq = after_key
            .trim_start()
            .strip_prefix('=')
            .unwrap_or(after_key);
        let value = after_eq.trim_start();
        let value_len = if let Some(quoted) = value.strip_prefix('\'') {
            // up to the closing quote, skipping \' escapes
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '\'' => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            1 + end
        } else {
            value.find(char::is_whitespace).unwrap_or(value.len())
        };
        out.push_str("password=");
        out.push_str(MASK);
        rest = &value[value_len..];
    }
    out.push_str(rest);
    out
}

/// Where `key` starts as a whole word followed by `=`.
fn find_key(text: &str, key: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(key) {
        let at = from + i;
        let before_ok = at == 0 || lower.as_bytes()[at - 1].is_ascii_whitespace();
        let after_ok = lower[at + key.len()..].trim_start().starts_with('=');
        if before_ok && after_ok {
            return Some(at);
        }
        from = at + key.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::mask_password;

    #[test]
    fn urls_lose_their_password() {
        assert_eq!(
            mask_password("postgres://ada:s3cr%40t@db.example:5432/app?sslmode=require"),
            "postgres://ada:***@db.example:5432/app?sslmode=require"
        );
        assert_eq!(
            mask_password("postgresql://ada:p@ss@host/app"),
            "postgresql://ada:***@host/app"
        );
        assert_eq!(
            mask_password("postgres://ada@host/app?password=secret&host=/tmp"),
            "postgres://ada@host/app?password=***&host=/tmp"
        );
        assert_eq!(
            mask_password("postgres:///app?host=/tmp"),
            "postgres:///app?host=/tmp"
        );
    }

    #[test]
    fn key_values_lose_their_password() {
        assert_eq!(
            mask_password("host=/tmp password=secret dbname=app"),
            "host=/tmp password=*** dbname=app"
        );
        assert_eq!(
            mask_password("host=db password = 'a \\' secret' user=ada"),
            "host=db password=*** user=ada"
        );
        assert_eq!(
            mask_password("user=password dbname=app"),
            "user=password dbname=app"
        );
    }
}
