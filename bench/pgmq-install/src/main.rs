//! Installs pgmq into a database from the SQL scripts embedded in the `pgmq`
//! crate (feature `install-sql-embedded`), so the benchmarks compare against
//! the released pgmq without vendoring its SQL.
//!
//!   pgmq-install SOCKET_DIR PORT [DATABASE] [USER]
//!
//! Connects over the Unix socket in SOCKET_DIR (the benchmark clusters listen
//! on no TCP address) and prints the installed pgmq version.

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::Row;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: pgmq-install SOCKET_DIR PORT [DATABASE] [USER]");
        std::process::exit(2);
    }
    let options = PgConnectOptions::new()
        .socket(&args[1])
        .port(args[2].parse()?)
        .database(args.get(3).map_or("postgres", String::as_str))
        .username(args.get(4).map_or("postgres", String::as_str));
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?;
    pgmq::install::install_sql_from_embedded(&pool).await?;
    // the install records each script it ran; the highest version is the one in place
    let version: String = sqlx::query(
        "SELECT array_to_string(max(string_to_array(version, '.')::int[]), '.') FROM pgmq.__pgmq_migrations",
    )
    .fetch_one(&pool)
    .await?
    .get(0);
    println!("pgmq {version}");
    Ok(())
}
