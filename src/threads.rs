//! Threads of our own inside a PostgreSQL process (the webhooks' runtime,
//! the span exporter): they never call PostgreSQL, and take no signal, whose
//! handlers are for the main thread, which alone touches PostgreSQL.

/// Blocks every signal in the calling thread.
pub fn block_signals() {
    // SAFETY: a sigset_t filled by sigfillset before pthread_sigmask reads
    // it; both act on the calling thread only.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// Starts thread `name` running `f` with every signal blocked from its
/// first instruction (a thread inherits the mask of the one that starts
/// it: blocked here around the start, then restored).
pub fn spawn_without_signals(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    // SAFETY: sigset_t values filled by sigfillset or by pthread_sigmask
    // itself; the masks change the calling thread alone, and the old one
    // is put back before returning.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let started = std::thread::Builder::new().name(name.to_string()).spawn(f);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        started
    }
}
