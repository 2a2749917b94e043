//! The command line.

use std::time::Duration;

pub const USAGE: &str = "\
usage: queue-web --database-url URL [--listen ADDR] [--allow-host NAME[:PORT]]...
                 [--token TOKEN] [--read-only] [--statement-timeout MS]
                 [--sample-interval SECONDS]

  --database-url URL        a database of the cluster (postgres://user@host/db or
                            key=value); every database where the extension is
                            installed is found from it. Env: QUEUE_WEB_DATABASE_URL
  --listen ADDR             default 127.0.0.1:8080
  --allow-host NAME[:PORT]  a name browsers may reach it by (repeatable; without a
                            port, on any port). Only requests whose Host is the
                            address it listens on (and localhost, 127.0.0.1 or
                            [::1] there, when that is a loopback address) or
                            such a name are answered, and a POST must come from
                            one of them (Origin): against DNS rebinding.
                            Env: QUEUE_WEB_ALLOW_HOST, comma-separated
  --token TOKEN             required by every request when set. Env: QUEUE_WEB_TOKEN
  --read-only               no actions: hidden, and POSTs refused
  --statement-timeout MS    each statement's statement_timeout, default 5000
  --sample-interval SECONDS how often each database's queue_stats is read, for the
                            charts and the cluster page, default 10
";

pub struct Args {
    pub database_url: String,
    pub listen: String,
    /// --allow-host: names the Host and Origin headers may carry besides
    /// the listening address.
    pub allow_hosts: Vec<String>,
    pub token: Option<String>,
    pub read_only: bool,
    pub statement_timeout: Duration,
    pub sample_interval: Duration,
}

impl Args {
    pub fn parse(mut words: impl Iterator<Item = String>) -> Result<Args, String> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let mut args = Args {
            database_url: env("QUEUE_WEB_DATABASE_URL").unwrap_or_default(),
            listen: "127.0.0.1:8080".into(),
            allow_hosts: Vec::new(),
            token: env("QUEUE_WEB_TOKEN"),
            read_only: false,
            statement_timeout: Duration::from_millis(5000),
            sample_interval: Duration::from_secs(10),
        };
        let mut allow_hosts = Vec::new();
        while let Some(word) = words.next() {
            let mut value = |name: &str| {
                words
                    .next()
                    .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
            };
            let number = |name: &str, text: String| {
                text.parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{name}: a positive whole number, not {text:?}"))
            };
            match word.as_str() {
                "--database-url" => args.database_url = value(&word)?,
                "--listen" => args.listen = value(&word)?,
                "--allow-host" => allow_hosts.push(value(&word)?),
                "--token" => args.token = Some(value(&word)?).filter(|t| !t.is_empty()),
                "--read-only" => args.read_only = true,
                "--statement-timeout" => {
                    let ms = number(&word, value(&word)?)?;
                    args.statement_timeout = Duration::from_millis(ms);
                }
                "--sample-interval" => {
                    let secs = number(&word, value(&word)?)?;
                    args.sample_interval = Duration::from_secs(secs);
                }
                "-h" | "--help" => return Err(USAGE.into()),
                other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
            }
        }
        // (the flags replace the environment's list, as --token replaces its variable)
        args.allow_hosts = if allow_hosts.is_empty() {
            env("QUEUE_WEB_ALLOW_HOST")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_string)
                .collect()
        } else {
            allow_hosts
        };
        if args.database_url.is_empty() {
            return Err(format!("--database-url is required\n{USAGE}"));
        }
        Ok(args)
    }
}
