//! Pages that reload on their own (the cluster, a queue, the dead
//! letters): a `<meta http-equiv="refresh">` in base.html, so no script
//! runs and the Content-Security-Policy stays `default-src 'none'`. It
//! reloads the page's own address without the note of an action, and
//! `?refresh=off` stops it.

use serde::{Deserialize, Serialize};

use crate::state::App;

#[derive(Deserialize, Default)]
pub struct Choice {
    refresh: Option<String>,
}

#[derive(Serialize)]
pub struct Refresh {
    /// Seconds between reloads; 0: off.
    pub secs: u64,
    /// What is reloaded, and the link that turns it off or on again.
    pub url: String,
    pub toggle: String,
}

/// The reload of the page at `path` (its query, if any, without the
/// action's note): every sample interval, at least 5 s and at most a minute.
pub fn every_sample(app: &App, path: &str, choice: &Choice) -> Refresh {
    let off = choice.refresh.as_deref() == Some("off");
    let glue = if path.contains('?') { '&' } else { '?' };
    Refresh {
        secs: if off {
            0
        } else {
            app.samples.interval.as_secs().clamp(5, 60)
        },
        url: path.to_string(),
        toggle: if off {
            path.to_string()
        } else {
            format!("{path}{glue}refresh=off")
        },
    }
}
