//! What goes wrong, shown plainly: the database's own refusal (message and
//! SQLSTATE), a name that is not there, or a request the dashboard refuses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use minijinja::context;

use crate::render;

#[derive(Debug)]
pub enum Failure {
    /// An error the database raised, as it said it.
    Database {
        sqlstate: String,
        message: String,
        detail: Option<String>,
        hint: Option<String>,
    },
    /// No connection, or it broke.
    Connection(String),
    NotFound(String),
    Forbidden(String),
    BadRequest(String),
    /// An action over many jobs that was refused part of the way: what it
    /// had done before.
    Partial {
        done: String,
        failure: Box<Failure>,
    },
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Failure {
        match e.as_db_error() {
            Some(db) => Failure::Database {
                sqlstate: db.code().code().to_string(),
                message: db.message().to_string(),
                detail: db.detail().map(str::to_string),
                hint: db.hint().map(str::to_string),
            },
            None => Failure::Connection(e.to_string()),
        }
    }
}

impl Failure {
    pub fn from_pool(e: deadpool_postgres::PoolError) -> Failure {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            other => Failure::Connection(other.to_string()),
        }
    }

    /// The one line a page shows for it: the message and its SQLSTATE.
    pub fn summary(&self) -> String {
        match self {
            Failure::Database {
                sqlstate, message, ..
            } => format!("{message} (SQLSTATE {sqlstate})"),
            Failure::Connection(m) => format!("cannot reach the database: {m}"),
            Failure::NotFound(m) | Failure::Forbidden(m) | Failure::BadRequest(m) => m.clone(),
            Failure::Partial { done, failure } => {
                format!("{} ({done} before that)", failure.summary())
            }
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            Failure::Database { sqlstate, .. } => match sqlstate.as_str() {
                "42501" => StatusCode::FORBIDDEN,
                "42704" => StatusCode::NOT_FOUND,
                s if s.starts_with("22") => StatusCode::BAD_REQUEST,
                _ => StatusCode::CONFLICT,
            },
            Failure::Connection(_) => StatusCode::BAD_GATEWAY,
            Failure::NotFound(_) => StatusCode::NOT_FOUND,
            Failure::Forbidden(_) => StatusCode::FORBIDDEN,
            Failure::BadRequest(_) => StatusCode::BAD_REQUEST,
            Failure::Partial { failure, .. } => failure.status(),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let (before, this) = match self {
            Failure::Partial { done, failure } => (Some(done), *failure),
            other => (None, other),
        };
        let (sqlstate, message, detail, hint) = match &this {
            Failure::Database {
                sqlstate,
                message,
                detail,
                hint,
            } => (
                Some(sqlstate),
                message.clone(),
                detail.clone(),
                hint.clone(),
            ),
            _ => (None, this.summary(), None, None),
        };
        let page = render::page(
            "error.html",
            context! { sqlstate, message, detail, hint, before, title => "Refused" },
        );
        (this.status(), page).into_response()
    }
}
