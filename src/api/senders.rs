//! Registering the function that the background worker delivers a queue's
//! jobs to, and unregistering it.

use pgrx::pg_sys::Oid;
use pgrx::prelude::*;

use crate::announce;
use crate::db::{self, args};
use crate::errors::{self, required, OrRaise};
use crate::queries;
use crate::regprocedure::Regprocedure;
use crate::rules;
use crate::sender_check::{self, Refusal};
use crate::worker::shared;

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
        // A function that the check found and a concurrent DROP took before
        // its signature was read is refused as missing.
        let signature = sender_check::check(sender, caller)
            .and_then(|()| sender_check::signature(client, sender).ok_or(Refusal::Missing))
            .unwrap_or_else(|refusal| {
                let named = sender_check::signature(client, sender);
                refusal.at_registration(sender, named).raise()
            });
        db::run(
            client,
            &queries::SET_SENDER,
            args![
                queue_id = queue.id,
                sender = signature.as_str(),
                role = caller,
                batch_size = batch_size,
            ],
        );
        // Its waiters learn that it is no longer pulled.
        announce::queue_changed(queue.id, true);
    });
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
        db::run(
            client,
            &queries::SET_SENDER,
            args![
                queue_id = queue.id,
                sender = no_sender,
                role = no_role,
                batch_size = no_size,
            ],
        )
        .first()
        .is_some_and(|r| r.value::<bool>("had_sender"))
    })
}
