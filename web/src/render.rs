//! The pages' templates. Every `.html` template escapes what it prints, so
//! a payload or an error containing `<script>` shows as text.

use std::sync::LazyLock;

use axum::response::{Html, IntoResponse, Response};
use minijinja::Environment;

static TEMPLATES: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    for (name, source) in [
        ("base.html", include_str!("../templates/base.html")),
        ("cluster.html", include_str!("../templates/cluster.html")),
        ("queue.html", include_str!("../templates/queue.html")),
        ("jobs.html", include_str!("../templates/jobs.html")),
        ("job.html", include_str!("../templates/job.html")),
        ("confirm.html", include_str!("../templates/confirm.html")),
        ("dead.html", include_str!("../templates/dead.html")),
        ("chart.html", include_str!("../templates/chart.html")),
        ("error.html", include_str!("../templates/error.html")),
    ] {
        env.add_template(name, source)
            .unwrap_or_else(|e| panic!("template {name}: {e}"));
    }
    env
});

/// The page `name` rendered with `context`.
pub fn page(name: &str, context: minijinja::Value) -> Response {
    let rendered = TEMPLATES
        .get_template(name)
        .and_then(|template| template.render(context));
    match rendered {
        Ok(html) => Html(html).into_response(),
        Err(e) => (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("template {name}: {e}"),
        )
            .into_response(),
    }
}

/// What a name keeps of itself in a link: letters, digits, `-`, `_`, `~`
/// (a `.` is escaped too, so a queue named `..` stays a name).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'~');

/// A path segment as a link needs it (database, queue and schedule names).
pub fn segment(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, SEGMENT).to_string()
}
