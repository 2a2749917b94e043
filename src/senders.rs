//! What makes a function a sender, checked in one place: at registration
//! (a refusal is an error) and again before every transaction of calls (a
//! refusal is each job's last_error), since the function may have been
//! dropped and made again, or the role may have lost EXECUTE, meanwhile.

use pgrx::pg_sys::{self, Oid};
use pgrx::spi::SpiClient;

use crate::db::{self, args};
use crate::errors::QueueError;
use crate::queries;

/// Why function `function` cannot be a sender for a role.
pub enum Refusal {
    /// No function has that oid.
    Missing,
    /// A procedure, aggregate, window or set-returning function.
    Kind {
        signature: String,
        kind: &'static str,
    },
    /// Not exactly one argument of type jsonb.
    Arguments { signature: String },
    /// The role may not execute it.
    NotExecutable { signature: String },
}

/// Whether `check` would accept function `function` for `role`, from the
/// syscache alone: what the worker asks before every transaction of calls.
/// (A fresh worker's first statements cost it milliseconds of catalog
/// look-ups each; this costs microseconds. check() stays the one word on
/// refusals and their wording.)
pub fn callable(function: Oid, role: Oid) -> bool {
    if !db::in_syscache(pg_sys::SysCacheIdentifier::PROCOID, function) {
        return false;
    }
    // SAFETY: lsyscache look-ups in the caller's transaction, which only
    // read, of a function known to exist (they raise an error otherwise);
    // get_func_signature gives back an array of `nargs` oids, read only
    // within that bound.
    unsafe {
        if pg_sys::get_func_prokind(function) as u8 != pg_sys::PROKIND_FUNCTION
            || pg_sys::get_func_retset(function)
        {
            return false;
        }
        let mut arguments: *mut Oid = std::ptr::null_mut();
        let mut nargs = 0;
        pg_sys::get_func_signature(function, &mut arguments, &mut nargs);
        if nargs != 1 || *arguments != pg_sys::JSONBOID {
            return false;
        }
    }
    crate::versions::may_execute(function, role)
}

/// A sender is a plain function of one jsonb argument that `role` may
/// execute. Returns its schema-qualified signature.
pub fn check(client: &mut SpiClient<'_>, function: Oid, role: Oid) -> Result<String, Refusal> {
    let found = db::run(
        client,
        &queries::SENDER_FUNCTION,
        args![function = function, role = role],
    )
    .first();
    let Some(row) = found else {
        return Err(Refusal::Missing);
    };
    let signature: String = row.value("signature");
    let kind = match row.value::<String>("kind").as_str() {
        "p" => Some("a procedure"),
        "a" => Some("an aggregate"),
        "w" => Some("a window function"),
        _ if row.value::<bool>("returns_set") => Some("a set-returning function"),
        _ => None,
    };
    if let Some(kind) = kind {
        return Err(Refusal::Kind { signature, kind });
    }
    if row.value::<Vec<Oid>>("arguments") != [pg_sys::JSONBOID] {
        return Err(Refusal::Arguments { signature });
    }
    if !row.value::<bool>("executable") {
        return Err(Refusal::NotExecutable { signature });
    }
    Ok(signature)
}

impl Refusal {
    /// The error registration raises.
    pub fn at_registration(self, function: Oid) -> QueueError {
        match self {
            Refusal::Missing => QueueError::UndefinedSender {
                oid: function.to_u32(),
            },
            Refusal::Kind { signature, kind } => QueueError::SenderKind {
                sender: signature,
                kind,
            },
            Refusal::Arguments { signature } => QueueError::SenderArguments { sender: signature },
            Refusal::NotExecutable { signature } => {
                QueueError::SenderNotExecutable { sender: signature }
            }
        }
    }

    /// The last_error of the jobs that a sender registered as `registered`
    /// by role `role_name` could not be called for.
    pub fn at_delivery(self, registered: &str, role_name: &str) -> String {
        match self {
            Refusal::Missing => format!("sender {registered} does not exist"),
            Refusal::Kind { signature, kind } => {
                format!("sender {signature} is now {kind}; a sender must be a plain function")
            }
            Refusal::Arguments { signature } => {
                format!("sender {signature} must take exactly one argument, of type jsonb")
            }
            Refusal::NotExecutable { signature } => {
                format!("role {role_name} no longer has EXECUTE on sender {signature}")
            }
        }
    }
}
