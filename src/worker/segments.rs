//! Shared memory sized at server start (by a setting or by
//! max_connections), which `pg_shmem_init!` cannot make: each segment asks
//! for its bytes in shmem_request_hook and is made, or found, in
//! shmem_startup_hook. One pair of hooks serves every segment.

use std::ffi::CStr;
use std::sync::OnceLock;

use pgrx::pg_sys;
use pgrx::prelude::*;

pub struct Segment {
    pub name: &'static CStr,
    /// Its size; the same in every process (from settings fixed at start).
    pub bytes: fn() -> usize,
    /// Called with the memory and whether it existed already (a process
    /// attaching to it), with AddinShmemInitLock held.
    pub attach: fn(memory: *mut u8, found: bool),
}

static SEGMENTS: OnceLock<&'static [&'static Segment]> = OnceLock::new();
static PREVIOUS_REQUEST: OnceLock<pg_sys::shmem_request_hook_type> = OnceLock::new();
static PREVIOUS_STARTUP: OnceLock<pg_sys::shmem_startup_hook_type> = OnceLock::new();

/// Asks for `segments`; while preloading only, once.
pub fn init(segments: &'static [&'static Segment]) {
    SEGMENTS.get_or_init(|| segments);
    // SAFETY: _PG_init runs in the postmaster while it loads the preloaded
    // libraries, before any other process exists: nothing else reads or
    // writes the hook variables now.
    unsafe {
        PREVIOUS_REQUEST.get_or_init(|| pg_sys::shmem_request_hook);
        pg_sys::shmem_request_hook = Some(request);
        PREVIOUS_STARTUP.get_or_init(|| pg_sys::shmem_startup_hook);
        pg_sys::shmem_startup_hook = Some(startup);
    }
}

fn segments() -> &'static [&'static Segment] {
    SEGMENTS.get().copied().unwrap_or(&[])
}

/// Asks for the segments' shared memory.
///
/// # Safety
///
/// Only PostgreSQL calls it, as shmem_request_hook, in the postmaster.
#[pg_guard]
unsafe extern "C-unwind" fn request() {
    if let Some(previous) = PREVIOUS_REQUEST.get().copied().flatten() {
        // SAFETY: the hook that was installed before ours, called as
        // PostgreSQL would have called it.
        unsafe { pg_sys::ffi::pg_guard_ffi_boundary(|| previous()) };
    }
    for segment in segments() {
        // SAFETY: called from shmem_request_hook, the one place where
        // adding to the main shared memory segment is allowed.
        unsafe { pg_sys::RequestAddinShmemSpace((segment.bytes)()) };
    }
}

/// Makes (or, in a process that attaches to them, finds) the segments.
///
/// # Safety
///
/// Only PostgreSQL calls it, as shmem_startup_hook, once the shared memory
/// that request() asked for exists.
#[pg_guard]
unsafe extern "C-unwind" fn startup() {
    if let Some(previous) = PREVIOUS_STARTUP.get().copied().flatten() {
        // SAFETY: as in request().
        unsafe { pg_sys::ffi::pg_guard_ffi_boundary(|| previous()) };
    }
    // SAFETY: ShmemInitStruct is called with AddinShmemInitLock held, as
    // PostgreSQL requires; MainLWLockArray exists before this hook runs,
    // and entry 21 is AddinShmemInitLock in 15 and 18 alike. Each size is
    // the one request() asked for (the settings it depends on are fixed at
    // server start), and the memory is aligned for any type.
    unsafe {
        // AddinShmemInitLock, a macro in lwlocknames.h that pgrx does not
        // bind (pgrx's own shared memory takes it the same way)
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        for segment in segments() {
            let mut found = false;
            let memory =
                pg_sys::ShmemInitStruct(segment.name.as_ptr(), (segment.bytes)(), &mut found);
            (segment.attach)(memory as *mut u8, found);
        }
        pg_sys::LWLockRelease(init_lock);
    }
}
