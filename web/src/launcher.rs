//! What the worker panel says when queue_workers shows no worker: why,
//! from what can be seen (a standby, the launcher in pg_stat_activity, the
//! preload list where the role may read it, queue.enabled), rather than a
//! guess.

use crate::databases::Client;
use crate::failure::Failure;

const LAUNCHER: &str = include_str!("../queries/launcher.sql");

/// What was seen: whether the workers are off (queue.enabled), and the
/// sentence for a cluster whose queue_workers shows none running.
pub struct Seen {
    pub off: bool,
    pub no_worker: String,
}

pub async fn seen(client: &Client) -> Result<Seen, Failure> {
    let row = client.query_one(LAUNCHER, &[]).await?;
    let standby: bool = row.get("standby");
    let launcher: bool = row.get("launcher");
    let preload: Option<String> = row.get("preload");
    let enabled: Option<String> = row.get("enabled");
    let idle_exit: Option<String> = row.get("idle_exit");
    let preloaded = preload.as_deref().map(|list| {
        list.split(',')
            .any(|name| name.trim().trim_matches('"') == "queue")
    });
    Ok(Seen {
        off: enabled.as_deref() == Some("off"),
        no_worker: sentence(
            standby,
            launcher,
            preload.as_deref(),
            preloaded,
            enabled,
            idle_exit,
        ),
    })
}

fn sentence(
    standby: bool,
    launcher: bool,
    preload: Option<&str>,
    preloaded: Option<bool>,
    enabled: Option<String>,
    idle_exit: Option<String>,
) -> String {
    if standby {
        return "None: this server is a standby, where no launcher or worker runs \
                (they run on the primary)."
            .into();
    }
    if enabled.as_deref() == Some("off") {
        return "None: queue.enabled is off, so the launcher starts no worker \
                (nothing is pushed and no schedule fires; pulling works)."
            .into();
    }
    if launcher {
        let idle = idle_exit.unwrap_or_else(|| "a minute".into());
        return format!(
            "None running now, and none needed: the launcher is running (the library is \
             preloaded), and starts a worker for a database when a sender's or webhook's job, \
             or a schedule's tick, is due there; a worker with nothing to do gives its slot \
             back after queue.idle_exit ({idle})."
        );
    }
    match (preloaded, preload) {
        (Some(false), Some(list)) => format!(
            "None: the library is not preloaded (shared_preload_libraries is '{list}'), so \
             nothing is pushed and no schedule fires; pulling (queue_claim) works."
        ),
        (Some(true), _) => "None, and no launcher is running although shared_preload_libraries \
                            includes queue: the server log says why (it restarts 5 s after a \
                            crash)."
            .into(),
        _ => "None, and no launcher is seen in pg_stat_activity; this role may not read \
              shared_preload_libraries (pg_read_all_settings) to tell whether the library \
              is preloaded."
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_says_what_it_sees() {
        let idle = || Some("1min".to_string());
        let on = || Some("on".to_string());
        assert!(
            sentence(false, true, Some("queue"), Some(true), on(), idle())
                .starts_with("None running now, and none needed: the launcher is running")
        );
        assert!(sentence(false, true, None, None, on(), idle()).contains("(1min)"));
        let off = sentence(
            false,
            false,
            Some("pg_stat_statements"),
            Some(false),
            None,
            None,
        );
        assert!(off.contains("not preloaded (shared_preload_libraries is 'pg_stat_statements')"));
        assert!(sentence(false, false, None, None, None, None).contains("may not read"));
        assert!(sentence(true, false, None, None, None, None).contains("standby"));
        assert!(
            sentence(false, true, None, None, Some("off".into()), idle())
                .contains("queue.enabled is off")
        );
    }
}
