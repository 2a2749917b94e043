//! queue-web: a dashboard for the `queue` extension. It speaks only the SQL
//! API, like any other client (docs/dashboard.md).

mod args;
mod cause;
mod chart;
mod databases;
mod dead_letters;
mod failure;
mod filters;
mod hosts;
mod launcher;
mod masking;
mod metrics;
mod pages;
mod refresh;
mod render;
mod rights;
mod routes;
mod samples;
mod security;
mod state;
mod stats;
mod stuck;
mod urls;

use std::sync::Arc;

#[tokio::main]
async fn main() {
    let args = match args::Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let app = match state::App::new(&args) {
        Ok(app) => Arc::new(app),
        Err(message) => {
            eprintln!("queue-web: {message}");
            std::process::exit(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(&args.listen).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("queue-web: cannot listen on {}: {e}", args.listen);
            std::process::exit(1);
        }
    };
    let address = listener
        .local_addr()
        .expect("a bound socket has an address");
    let hosts = match hosts::Hosts::new(address, &args.allow_hosts) {
        Ok(hosts) => Arc::new(hosts),
        Err(message) => {
            eprintln!("queue-web: {message}");
            std::process::exit(2);
        }
    };
    if !address.ip().is_loopback() && args.token.is_none() {
        eprintln!(
            "queue-web: warning: listening on {address}, beyond this machine, without --token"
        );
    }
    if !address.ip().is_loopback() && args.allow_hosts.is_empty() {
        eprintln!(
            "queue-web: only requests for Host {address} are answered: name the others \
             (this machine's name, a proxy's) with --allow-host"
        );
    }
    // The tests and `make demo` read this line to find the port.
    println!(
        "queue-web listening on http://{address}/ (database {})",
        app.shown_url
    );
    tokio::spawn(state::sample_forever(app.clone()));
    let shutdown = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM can be caught");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
        }
    };
    axum::serve(listener, routes::router(app, hosts))
        .with_graceful_shutdown(shutdown)
        .await
        .expect("the server runs");
}
