//! The jobs of a delivery under way, written down outside the database.
//!
//! A SQL sender queue without order or limits per group is delivered in
//! one transaction per batch: jobs locked, calls, outcomes, one commit; the
//! attempt is written only for a job that fails. If a sender kills the
//! process (or the server) in the middle, that transaction rolls back and
//! the attempt would not count: the job would kill every worker after. So
//! before the calls the worker writes the batch's ids to a file in the
//! data directory (`pg_queue/deliveries.<database oid>.<slot>`), and
//! removes it once the outcomes have committed. A file that is still there
//! when a worker starts names the suspects: those still ready count the
//! attempt that was under way (and, in a queue with a rate limit, a claim
//! in its windows, which the batch's rollback took back) and are delivered
//! one per transaction (count_attempts.sql, then delivery.rs's recovery),
//! so that a job that kills its worker only uses up its own attempts.
//!
//! Not synced to disk: it must outlive a process or a crash of the server,
//! which the operating system's cache does; a crash of the machine loses
//! it, which a sender does not cause. A file cut short by the crash gives
//! the ids that were whole.

use std::ffi::CStr;
use std::path::PathBuf;

use pgrx::pg_sys;

/// The folder of the files, and the start of this database's names.
fn folder_and_prefix() -> (PathBuf, String) {
    // SAFETY: DataDir is set at startup, before any worker runs, to the
    // data directory's path, and never changes; MyDatabaseId is set once
    // the worker is connected to its database.
    let (data_dir, database) = unsafe {
        (
            CStr::from_ptr(pg_sys::DataDir)
                .to_string_lossy()
                .into_owned(),
            pg_sys::MyDatabaseId,
        )
    };
    (
        PathBuf::from(data_dir).join("pg_queue"),
        format!("deliveries.{}.", database.to_u32()),
    )
}

/// The file of the worker in `slot` (a database's helpers deliver beside
/// its worker, each with its own).
fn path(slot: usize) -> PathBuf {
    let (folder, prefix) = folder_and_prefix();
    folder.join(format!("{prefix}{slot}"))
}

/// The batch `ids` is about to be delivered by the worker in `slot`: its
/// ids are written down.
pub fn write(slot: usize, ids: &[i64]) {
    let text: String = ids.iter().map(|id| format!("{id}\n")).collect();
    let path = path(slot);
    let written = std::fs::write(&path, &text).or_else(|_| {
        std::fs::create_dir_all(path.parent().expect("a folder"))?;
        std::fs::write(&path, &text)
    });
    if let Err(e) = written {
        // Without it, a crash mid-delivery would count no attempt.
        pgrx::error!("queue worker: cannot write {}: {e}", path.display());
    }
}

/// The outcomes of the batch of the worker in `slot` committed: nothing is
/// under way.
pub fn clear(slot: usize) {
    remove(&path(slot));
}

fn remove(path: &PathBuf) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => pgrx::error!("queue worker: cannot remove {}: {e}", path.display()),
    }
}

/// What stopped workers of this database left under way.
pub struct Left {
    pub ids: Vec<i64>,
    files: Vec<PathBuf>,
}

impl Left {
    /// Once the suspects are marked: the files go.
    pub fn forget(self) {
        for file in &self.files {
            remove(file);
        }
    }
}

/// The ids of deliveries that stopped workers of this database left under
/// way (none when they ended their batches). Read by its worker when it is
/// the database's only one.
pub fn left() -> Left {
    let (folder, prefix) = folder_and_prefix();
    let mut left = Left {
        ids: Vec::new(),
        files: Vec::new(),
    };
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return left;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            // Each id ends with its newline: a piece after the last one was
            // cut short.
            let whole = text.rsplit_once('\n').map_or("", |(whole, _)| whole);
            left.ids
                .extend(whole.lines().filter_map(|line| line.parse::<i64>().ok()));
        }
        left.files.push(entry.path());
    }
    left
}
