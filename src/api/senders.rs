//! Registering the function that the background worker delivers a queue's
//! jobs to, and unregistering it.

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use crate::db;
use crate::errors::{self, required, OrRaise, QueueError};
use crate::queries;
use crate::regprocedure::Regprocedure;
use crate::rules;
use crate::worker::{shared, wake};

#[pg_extern(volatile, parallel_unsafe)]
fn queue_register_sender(
    queue: Option<&str>,
    sender: Option<Regprocedure>,
    batch_size: default!(Option<i32>, 100),
) {
    let name = required(queue, "queue");
    let sender = required(sender, "sender").0;
    let batch_size = rules::check_batch_size(required(batch_size, "batch_size")).or_raise();
    rules::check_name(name).or_raise();
    let caller = db::calling_role();
    super::queues::with_owned_queue(name, "register a sender for", |client, queue| {
        let signature = check_sender(client, sender, caller).or_raise();
        db::run(
            client,
            &queries::SET_SENDER,
            &[
                queue.id.into(),
                signature.as_str().into(),
                caller.into(),
                batch_size.into(),
            ],
        );
    });
    wake::on_commit(true);
    if !shared::available() {
        errors::warn_without_preload();
    }
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_unregister_sender(queue: Option<&str>) -> bool {
    let name = required(queue, "queue");
    rules::check_name(name).or_raise();
    let caller = db::calling_role();
    db::with_tables(|client| {
        let Some(queue) = crate::catalog::find(client, name).or_raise() else {
            return false;
        };
        queue
            .check_owner(caller, "unregister the sender of")
            .or_raise();
        let no_sender: Option<&str> = None;
        let no_role: Option<Oid> = None;
        let no_size: Option<i32> = None;
        let rows = db::run(
            client,
            &queries::SET_SENDER,
            &[
                queue.id.into(),
                no_sender.into(),
                no_role.into(),
                no_size.into(),
            ],
        );
        rows.first().get_one::<bool>().ok().flatten() == Some(true)
    })
}

/// A sender is a plain function of one jsonb argument that `role` may
/// execute. Returns its schema-qualified signature.
fn check_sender(
    client: &mut pgrx::spi::SpiClient<'_>,
    function: Oid,
    role: Oid,
) -> Result<String, QueueError> {
    let rows = db::run(
        client,
        &queries::SENDER_FUNCTION,
        &[function.into(), role.into()],
    );
    let row = rows.first();
    let Ok(Some(kind)) = row.get::<String>(1) else {
        // a dangling oid cast to regprocedure
        return Err(QueueError::UndefinedSender {
            oid: function.to_u32(),
        });
    };
    let returns_set: bool = row.get(2).ok().flatten().expect("proretset");
    let arguments: Vec<Oid> = row.get(3).ok().flatten().expect("proargtypes");
    let sender: String = row.get(4).ok().flatten().expect("a signature");
    let kind = match kind.as_str() {
        "p" => Some("a procedure"),
        "a" => Some("an aggregate"),
        "w" => Some("a window function"),
        _ if returns_set => Some("a set-returning function"),
        _ => None,
    };
    if let Some(kind) = kind {
        return Err(QueueError::SenderKind { sender, kind });
    }
    if arguments != [pg_sys::JSONBOID] {
        return Err(QueueError::SenderArguments { sender });
    }
    let executable: bool = row.get(5).ok().flatten().unwrap_or(false);
    if !executable {
        return Err(QueueError::SenderNotExecutable { sender });
    }
    Ok(sender)
}
