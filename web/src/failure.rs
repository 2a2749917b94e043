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
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let (sqlstate, message, detail, hint) = match &self {
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
            _ => (None, self.summary(), None, None),
        };
        let page = render::page(
            "error.html",
            context! { sqlstate, message, detail, hint, title => "Refused" },
        );
        (self.status(), page).into_response()
    }
}
