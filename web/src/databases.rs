//! The cluster's databases where the extension is installed, and a small
//! pool of connections to each. Every connection carries a
//! statement_timeout, and every statement runs on its own (autocommit), so a
//! page never holds a lock or a snapshot past one statement.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::{Config, NoTls};

use crate::failure::Failure;

/// How long a list of databases is trusted before it is read again.
const LIST_TTL: Duration = Duration::from_secs(5);
/// Connections per database: a page's few statements, and the sampler.
const POOL_SIZE: usize = 2;

const DATABASES: &str = include_str!("../queries/databases.sql");
const EXTENSION: &str = include_str!("../queries/extension.sql");
const SEARCH_PATH: &str = include_str!("../queries/search_path.sql");

pub struct Databases {
    base: Config,
    /// The database named by --database-url, where the list is read.
    home: String,
    pools: Mutex<HashMap<String, Pool>>,
    /// The served databases (with the extension), and when that was read.
    served: tokio::sync::Mutex<Option<(Instant, Vec<String>)>>,
}

pub type Client = deadpool_postgres::Object;

impl Databases {
    pub fn new(url: &str, statement_timeout: Duration) -> Result<Databases, String> {
        let mut base: Config = url
            .parse()
            .map_err(|e| format!("--database-url is not a connection string: {e}"))?;
        let home = base
            .get_dbname()
            .or(base.get_user())
            .unwrap_or("postgres")
            .to_string();
        // Appended to the URL's own options, so these win. No JIT: the
        // pages' statements are short, and the views' estimates on a small
        // or unanalysed database can pass jit_above_cost, when compiling
        // costs a second that the statement itself does not.
        let options = format!(
            "{} -c statement_timeout={} -c idle_in_transaction_session_timeout={} -c jit=off",
            base.get_options().unwrap_or(""),
            statement_timeout.as_millis(),
            statement_timeout.as_millis() * 2
        );
        base.options(options.trim())
            .application_name("queue-web")
            .connect_timeout(statement_timeout);
        Ok(Databases {
            base,
            home,
            pools: Mutex::new(HashMap::new()),
            served: tokio::sync::Mutex::new(None),
        })
    }

    /// A connection to `database`, whose search_path finds the extension's
    /// schema (wherever it was created) after pg_catalog.
    pub async fn client(&self, database: &str) -> Result<Client, Failure> {
        let pool = self.pool(database);
        pool.get().await.map_err(Failure::from_pool)
    }

    fn pool(&self, database: &str) -> Pool {
        let mut pools = self.pools.lock().unwrap();
        pools
            .entry(database.to_string())
            .or_insert_with(|| {
                let mut config = self.base.clone();
                config.dbname(database);
                let manager = Manager::from_config(
                    config,
                    NoTls,
                    ManagerConfig {
                        recycling_method: RecyclingMethod::Fast,
                    },
                );
                Pool::builder(manager)
                    .max_size(POOL_SIZE)
                    .post_create(Hook::async_fn(|client, _| {
                        Box::pin(async move {
                            client
                                .batch_execute(SEARCH_PATH)
                                .await
                                .map_err(HookError::Backend)
                        })
                    }))
                    .build()
                    .expect("a pool with a runtime builds")
            })
            .clone()
    }

    /// Closes the connections to `database` (one without the extension).
    fn forget(&self, database: &str) {
        if let Some(pool) = self.pools.lock().unwrap().remove(database) {
            pool.close();
        }
    }

    /// The databases where the extension is installed, found from the home
    /// database: pg_database's list, then pg_extension in each.
    pub async fn served(&self) -> Result<Vec<String>, Failure> {
        let mut cached = self.served.lock().await;
        if let Some((at, list)) = cached.as_ref() {
            if at.elapsed() < LIST_TTL {
                return Ok(list.clone());
            }
        }
        let names: Vec<String> = {
            let client = self.client(&self.home).await?;
            client
                .query(DATABASES, &[])
                .await?
                .iter()
                .map(|row| row.get(0))
                .collect()
        };
        let checks = names.iter().map(|name| self.has_extension(name));
        let found = futures_util::future::join_all(checks).await;
        let list: Vec<String> = names
            .into_iter()
            .zip(found)
            .filter(|(_, found)| *found)
            .map(|(name, _)| name)
            .collect();
        *cached = Some((Instant::now(), list.clone()));
        Ok(list)
    }

    async fn has_extension(&self, database: &str) -> bool {
        let found = match self.client(database).await {
            Ok(client) => matches!(client.query_opt(EXTENSION, &[]).await, Ok(Some(_))),
            // (one we may not connect to is not shown)
            Err(_) => false,
        };
        if !found && database != self.home {
            self.forget(database);
        }
        found
    }

    /// A connection to `database` if the extension is installed there; a
    /// name that is not such a database is "not found", not a connection.
    pub async fn served_client(&self, database: &str) -> Result<Client, Failure> {
        self.require_served(database).await?;
        self.client(database).await
    }

    /// "Not found" unless the extension is installed in `database`.
    pub async fn require_served(&self, database: &str) -> Result<(), Failure> {
        if !self.served().await?.iter().any(|name| name == database) {
            return Err(Failure::NotFound(format!(
                "no database {database:?} with the queue extension"
            )));
        }
        Ok(())
    }
}
