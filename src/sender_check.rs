//! What makes a function a sender, checked in one place: at registration
//! (a refusal is an error) and again before every transaction of calls (a
//! refusal is each job's last_error), since the function may have been
//! dropped and made again, or the role may have lost EXECUTE, meanwhile.
//! The check reads the syscache alone: a fresh worker's first statements
//! cost it milliseconds of catalog look-ups each, this costs microseconds.
//! Only the wording of a refusal, and a registration, read the signature
//! with a statement.

use pgrx::pg_sys::{self, Oid};
use pgrx::spi::SpiClient;

use crate::db::{self, args};
use crate::errors::QueueError;
use crate::queries;

/// Why a function cannot be a sender for a role.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No function has that oid.
    Missing,
    /// A procedure, aggregate, window or set-returning function (as the
    /// words say).
    Kind(&'static str),
    /// Not exactly one argument of type jsonb.
    Arguments,
    /// The role may not execute it.
    NotExecutable,
}

/// A sender is a plain function of one jsonb argument that `role` may
/// execute.
pub fn check(function: Oid, role: Oid) -> Result<(), Refusal> {
    if !db::in_syscache(pg_sys::SysCacheIdentifier::PROCOID, function) {
        return Err(Refusal::Missing);
    }
    // SAFETY: lsyscache look-ups in the caller's transaction, which only
    // read, of a function known to exist (they raise an error otherwise);
    // get_func_signature gives back an array of `nargs` oids, read only
    // within that bound.
    unsafe {
        let kind = match pg_sys::get_func_prokind(function) as u8 {
            pg_sys::PROKIND_PROCEDURE => Some("a procedure"),
            pg_sys::PROKIND_AGGREGATE => Some("an aggregate"),
            pg_sys::PROKIND_WINDOW => Some("a window function"),
            _ if pg_sys::get_func_retset(function) => Some("a set-returning function"),
            _ => None,
        };
        if let Some(kind) = kind {
            return Err(Refusal::Kind(kind));
        }
        let mut arguments: *mut Oid = std::ptr::null_mut();
        let mut nargs = 0;
        pg_sys::get_func_signature(function, &mut arguments, &mut nargs);
        if nargs != 1 || *arguments != pg_sys::JSONBOID {
            return Err(Refusal::Arguments);
        }
    }
    if !crate::versions::may_execute(function, role) {
        return Err(Refusal::NotExecutable);
    }
    Ok(())
}

/// The schema-qualified signature of `function`, as registration stores it;
/// None once a concurrent DROP took it (after `check` found it).
pub fn signature(client: &mut SpiClient<'_>, function: Oid) -> Option<String> {
    db::run(
        client,
        &queries::SENDER_SIGNATURE,
        args![function = function],
    )
    .first()
    .map(|row| row.value("signature"))
}

/// A function as a refusal names it: its signature, or its oid once gone.
fn named(function: Oid, signature: Option<String>) -> String {
    signature.unwrap_or_else(|| function.to_u32().to_string())
}

impl Refusal {
    /// The error registration raises for `function`, whose `signature`
    /// (from `signature`) names it.
    pub fn at_registration(self, function: Oid, signature: Option<String>) -> QueueError {
        let sender = named(function, signature);
        match self {
            Refusal::Missing => QueueError::UndefinedSender {
                oid: function.to_u32(),
            },
            Refusal::Kind(kind) => QueueError::SenderKind { sender, kind },
            Refusal::Arguments => QueueError::SenderArguments { sender },
            Refusal::NotExecutable => QueueError::SenderNotExecutable { sender },
        }
    }

    /// The last_error of the jobs that a sender registered as `registered`
    /// by role `role_name` could not be called for: `function` now, whose
    /// `signature` (from `signature`) names it.
    pub fn at_delivery(
        self,
        registered: &str,
        role_name: &str,
        function: Oid,
        signature: Option<String>,
    ) -> String {
        let sender = named(function, signature);
        match self {
            Refusal::Missing => format!("sender {registered} does not exist"),
            Refusal::Kind(kind) => {
                format!("sender {sender} is now {kind}; a sender must be a plain function")
            }
            Refusal::Arguments => {
                format!("sender {sender} must take exactly one argument, of type jsonb")
            }
            Refusal::NotExecutable => {
                format!("role {role_name} no longer has EXECUTE on sender {sender}")
            }
        }
    }
}
