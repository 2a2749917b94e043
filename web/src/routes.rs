//! The URLs. Database, queue and schedule names are path segments.

use std::sync::Arc;

use axum::response::Redirect;
use axum::routing::{get, post};
use axum::Router;

use crate::pages::{actions, cluster, jobs, queue};
use crate::security;
use crate::state::App;

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(cluster::show))
        .route("/db/{db}", get(|| async { Redirect::to("/") }))
        .route("/db/{db}/queue/{queue}", get(queue::show))
        .route("/db/{db}/queue/{queue}/jobs", get(jobs::list))
        .route("/db/{db}/queue/{queue}/pause", post(actions::pause))
        .route("/db/{db}/queue/{queue}/resume", post(actions::resume))
        .route("/db/{db}/queue/{queue}/purge", post(actions::purge))
        .route("/db/{db}/job", get(jobs::lookup))
        .route("/db/{db}/job/{id}", get(jobs::show))
        .route("/db/{db}/job/{id}/retry", post(actions::retry))
        .route("/db/{db}/job/{id}/cancel", post(actions::cancel))
        .route("/db/{db}/schedule/{name}/run", post(actions::run_schedule))
        .layer(axum::middleware::from_fn_with_state(
            app.security.clone(),
            security::guard,
        ))
        .with_state(app)
}
