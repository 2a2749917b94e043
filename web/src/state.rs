//! What every request shares, and the sampler that keeps its counts.

use std::sync::Arc;

use crate::args::Args;
use crate::databases::Databases;
use crate::failure::Failure;
use crate::masking::mask_password;
use crate::samples::Samples;
use crate::security::Security;
use crate::stats;
use crate::stuck;

pub struct App {
    pub databases: Databases,
    pub samples: Samples,
    pub security: Arc<Security>,
    /// --database-url without its password, for the pages' footer.
    pub shown_url: String,
}

impl App {
    pub fn new(args: &Args) -> Result<App, String> {
        Ok(App {
            databases: Databases::new(&args.database_url, args.statement_timeout)?,
            samples: Samples::new(args.sample_interval),
            security: Arc::new(Security::new(args.token.clone(), args.read_only)),
            shown_url: mask_password(&args.database_url),
        })
    }
}

/// Reads `database`'s counts and what is stuck there now, and keeps them
/// as its latest reading.
pub async fn read(app: &App, database: &str) -> Result<Vec<stats::QueueRow>, Failure> {
    let client = app.databases.client(database).await?;
    let rows = stats::fetch(&client).await?;
    app.samples.record(database, &rows);
    let found = stuck::fetch(&client, &rows).await;
    app.samples.record_stuck(database, &found);
    Ok(rows)
}

/// Samples every served database at each interval, one database after the
/// other (the sampler never needs more than one connection at a time).
pub async fn sample_forever(app: Arc<App>) {
    let mut ticks = tokio::time::interval(app.samples.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Ok(databases) = app.databases.served().await else {
            continue;
        };
        for database in databases {
            let _ = read(&app, &database).await;
        }
    }
}
