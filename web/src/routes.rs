//! The URLs. Database, queue and schedule names are path segments.

use std::sync::Arc;

use axum::response::Redirect;
use axum::routing::{get, post};
use axum::Router;

use crate::hosts::{self, Hosts};
use crate::metrics;
use crate::pages::{actions, cluster, confirm, dead, dead_actions, heads, job, jobs, queue};
use crate::security;
use crate::state::App;

/// A GET of a destructive action's URL is its confirmation page; the POST
/// that page makes is the action.
pub fn router(app: Arc<App>, hosts: Arc<Hosts>) -> Router {
    Router::new()
        .route("/", get(cluster::show))
        .route("/dead", get(dead::cluster))
        .route(
            "/dead/{act}",
            get(dead_actions::ask_cluster).post(dead_actions::act_cluster),
        )
        .route("/db/{db}", get(|| async { Redirect::to("/") }))
        .route("/db/{db}/queue/{queue}", get(queue::show))
        .route("/db/{db}/queue/{queue}/jobs", get(jobs::list))
        .route("/db/{db}/queue/{queue}/dead", get(dead::queue))
        .route(
            "/db/{db}/queue/{queue}/dead/{act}",
            get(dead_actions::ask_queue).post(dead_actions::act_queue),
        )
        .route("/db/{db}/queue/{queue}/pause", post(actions::pause))
        .route("/db/{db}/queue/{queue}/resume", post(actions::resume))
        .route(
            "/db/{db}/queue/{queue}/purge",
            get(confirm::purge).post(actions::purge),
        )
        .route("/db/{db}/job", get(jobs::lookup))
        .route("/db/{db}/job/{id}", get(job::show))
        .route("/db/{db}/job/{id}/retry", post(actions::retry))
        .route(
            "/db/{db}/job/{id}/cancel",
            get(confirm::cancel).post(actions::cancel),
        )
        .route("/db/{db}/job/{id}/run-now", post(heads::run_now))
        .route(
            "/db/{db}/job/{id}/let-go",
            get(heads::ask_let_go).post(heads::let_go),
        )
        .route("/db/{db}/schedule/{name}/run", post(actions::run_schedule))
        // Prometheus' scrape, behind the same token as the pages
        .route("/metrics", get(metrics::serve))
        .layer(axum::middleware::from_fn_with_state(
            app.security.clone(),
            security::guard,
        ))
        // (the last layer runs first: the Host before the token)
        .layer(axum::middleware::from_fn_with_state(hosts, hosts::guard))
        .with_state(app)
}
