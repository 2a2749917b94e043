//! The worker of one database, started by the launcher into a slot. It
//! connects, checks that the extension is there, takes back the jobs a
//! stopped worker left in flight, and then goes round: one batch per
//! sender queue, upkeep, and a sleep on its latch (set by committing
//! transactions) until the next job falls due or the poll interval ends.
//!
//! It gives its slot back (telling the launcher when its database next
//! needs a worker: a scheduled job, a lease, a cleanup) when nothing is due
//! and the launcher asks for the slot, or when it has been idle for
//! queue.idle_exit; when the launcher asks while jobs are due, once its
//! turn of decisions::TURN_BATCHES batches is over (its database then waits in line
//! again); and at once when its database is needed alone.
//!
//! With webhook requests open (http.rs) it never leaves idle, wakes when
//! an outcome comes back, records it and refills its queue in one
//! transaction, and, asked for its slot, goes on while outcomes come (its
//! turn ends as a SQL sender's does) but leaves the open requests to the
//! next worker once 2 s pass without one.

use std::cell::Cell;

use pgrx::bgworkers::BackgroundWorker;
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use std::sync::atomic::Ordering;

use super::decisions::{self, AfterRound, Step};
use super::delivery::{self, Delivery};
use super::recurring::Recurring;
use super::session::{self, Session};
use super::shared::{self, Installed, State, SHARED};
use super::upkeep::Upkeep;
use super::wake;
use crate::gucs;
use crate::versions;

thread_local! {
    /// The worker is exiting on purpose.
    static CLEAN_EXIT: Cell<bool> = const { Cell::new(false) };
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn queue_worker_main(arg: pg_sys::Datum) {
    let slot = arg.value();
    // SIGTERM ends even a running statement (DROP DATABASE waits for it);
    // SIGUSR1 (procsignal barriers) keeps the handler background workers
    // with a database connection get.
    versions::set_signal_handler(pg_sys::SIGTERM, on_sigterm);
    versions::set_signal_handler(pg_sys::SIGHUP, on_sighup);
    // SAFETY: registered once, at the start of the worker's main;
    // at_exit has the callback's signature and lives as long as the
    // process; the slot index is a plain value that it gets back.
    unsafe { pg_sys::before_shmem_exit(Some(at_exit), pg_sys::Datum::from(slot)) };
    // SAFETY: a background worker unblocks its signals once its handlers
    // are installed, as here, from its main thread.
    unsafe { pg_sys::BackgroundWorkerUnblockSignals() };
    let database = SHARED.share().workers[slot].database;
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(database), None);
    super::name_this_process("queue worker");
    let (helper, upkeep_at, recovered, visit) = {
        let mut shared = SHARED.exclusive();
        let me = &mut shared.workers[slot];
        // SAFETY: MyProcPid is set when the process starts and never
        // changes after.
        me.pid = unsafe { pg_sys::MyProcPid };
        me.procno = shared::my_procno();
        me.state = State::Idle;
        let helper = me.helper;
        match shared.database_mut(database) {
            Some(entry) if !helper => (
                false,
                entry.upkeep_at.load(Ordering::Relaxed),
                entry.recovered,
                std::mem::take(&mut entry.visit),
            ),
            _ => (helper, 0, true, false),
        }
    };
    let Some(session) = session::transaction(|| Session::find(None)) else {
        set_installed(database, Installed::No);
        exit_cleanly();
    };
    set_installed(database, Installed::Yes);
    wake::in_worker();
    if helper {
        help(slot, session);
    }
    let mut worker = Worker {
        slot,
        database,
        session,
        delivery: Delivery::new(slot),
        recurring: Recurring::new(),
        upkeep: Upkeep::new(crate::time::now_us(), upkeep_at, visit || !recovered),
        last_work: (!visit).then(crate::time::now_us),
        batches: 0,
        next_round_at: i64::MAX,
        handover_from: None,
        recovered,
        recover_at: None,
    };
    loop {
        worker.recover_if_due(false);
        pgrx::check_for_interrupts!();
        reload_if_asked();
        let now = crate::time::now_us();
        let woken = take_wake(slot, now);
        let stop = stop_requested(slot) || !gucs::ENABLED.get();
        let asked = yield_asked(slot);
        let sending = worker.delivery.sending();
        // Read only where it counts: reading takes the answers in.
        let answered = !stop && sending && asked && worker.delivery.any_answered();
        let (step, handover_from) = decisions::next_step(&decisions::Moment {
            now,
            stop,
            sending,
            asked,
            answered,
            woken,
            next_round_at: worker.next_round_at,
            // Looked at only when the worker would wait on open requests alone.
            record_in_us: if sending && !woken && now < worker.next_round_at {
                worker.delivery.record_in_us()
            } else {
                None
            },
            handover_from: worker.handover_from,
        });
        worker.handover_from = handover_from;
        // Its turn is over when asked: webhook queues send no more.
        let handing_over = asked && worker.batches >= decisions::TURN_BATCHES;
        match step {
            Step::Stop => worker.stop(),
            Step::HandOver => worker.hand_over(now),
            Step::AwaitAnswers { for_us } => sleep_us(for_us, worker.delivery.answered_fd()),
            Step::Refill => worker.refill(now, handing_over),
            // A turn over while requests are open rests until their outcomes
            // are recorded.
            Step::Round => {
                worker.recover_if_due(true);
                match worker.round(now, woken, handing_over) {
                    AfterRound::Again => {}
                    AfterRound::Rest | AfterRound::Leave => worker.rest(),
                }
            }
        }
    }
}

/// A worker's state between its steps (decisions::next_step says which
/// comes next).
struct Worker {
    slot: usize,
    database: Oid,
    session: Session,
    delivery: Delivery,
    recurring: Recurring,
    upkeep: Upkeep,
    /// When the worker last had work (a job, a wake-up, its start); None:
    /// not yet, for a visit, which leaves as soon as nothing is due.
    last_work: Option<i64>,
    /// Batches delivered since it started (its turn: decisions.rs).
    batches: usize,
    /// When the next round is due while the worker waits on webhook
    /// requests (a wake-up or an answer brings it forward).
    next_round_at: i64,
    /// When the worker, asked for its slot, began to wait for its webhook
    /// requests.
    handover_from: Option<i64>,
    /// Jobs a stopped worker left in flight have all been taken back.
    recovered: bool,
    /// When jobs left in flight that wait for a rate window are looked at
    /// again.
    recover_at: Option<i64>,
}

impl Worker {
    /// Jobs a stopped worker left in flight are taken back once this
    /// worker is its database's only one (a helper may still be at work
    /// beside a worker that has just started, and none starts before this
    /// is done) and has no webhook request open (their jobs are in flight
    /// too). The database is recovered once none waits for a rate window.
    /// `before_round`: a round is about to claim. A job left in flight
    /// that waits for a rate window is then looked at up to a second early:
    /// the round would see the window free by its own read of the clock a
    /// moment before `recover_at`, and give the job's place in the window to
    /// a job that never ran.
    fn recover_if_due(&mut self, before_round: bool) {
        let early = if before_round {
            crate::time::SECOND_US
        } else {
            0
        };
        if self.recovered
            || self.delivery.sending()
            || !alone(self.slot, self.database)
            || self
                .recover_at
                .is_some_and(|at| crate::time::now_us() + early < at)
        {
            return;
        }
        let (left, later) = self.delivery.recover(&self.session);
        if left > 0 {
            self.last_work = Some(crate::time::now_us());
        }
        self.recover_at = later;
        if later.is_none() {
            if let Some(entry) = SHARED.exclusive().database_mut(self.database) {
                entry.recovered = true;
            }
        }
    }

    /// Stopped, or queue.enabled turned off: requests still open go back to
    /// the line at once, rather than when their leases expire.
    fn stop(&mut self) -> ! {
        if self.delivery.sending() {
            self.delivery.abandon(&self.session);
        }
        exit_cleanly();
    }

    /// Asked for its slot with webhook requests open and no answer for the
    /// grace period: it leaves them to the next worker, so that a hung
    /// endpoint never holds a slot that another database waits for.
    fn hand_over(&mut self, now: i64) -> ! {
        self.delivery.abandon(&self.session);
        // its jobs are ready again, and no commit will say so: back in line
        // at once
        want_again(self.database, now);
        exit_cleanly();
    }

    /// Waiting on webhook requests only, with answers to record: they are
    /// recorded, and the room they make in their queues is filled, in one
    /// transaction.
    fn refill(&mut self, now: i64, handing_over: bool) {
        match self.delivery.refill(&self.session, handing_over) {
            Some(refill) => {
                self.batches += refill.batches;
                self.last_work = Some(now);
                if refill.claimed > 0 {
                    self.upkeep.note_work();
                }
            }
            // The extension is gone or was made again: a round finds out.
            None => self.next_round_at = now,
        }
    }

    /// A round: schedules, a batch of each queue with due jobs, upkeep.
    /// What comes after it: another round or a rest (Leave: its turn is
    /// over but webhook requests are open), or, when it leaves, nothing.
    fn round(&mut self, now: i64, woken: bool, handing_over: bool) -> AfterRound {
        // DROP EXTENSION, or a new schema after ALTER EXTENSION SET SCHEMA
        let known = self.session.clone();
        self.session = match session::transaction(|| Session::find(Some(known))) {
            Some(found) => found,
            None => {
                set_installed(self.database, Installed::No);
                exit_cleanly();
            }
        };
        // Ticks fired are no reason to stay: a database whose next tick is far
        // away keeps no worker; the jobs' delivery is.
        if self.recurring.run(&self.session, self.database, now) > 0 {
            self.upkeep.note_work();
        }
        let slot = self.slot;
        let round = self
            .delivery
            .round(&self.session, handing_over, || stop_requested(slot));
        // Another round at once, unless the worker rests.
        self.next_round_at = now;
        self.batches += round.batches;
        self.recovered = note_round(self.database, round.more && !handing_over);
        // A worker whose slot another database waits for puts its maintenance
        // off, within limits: see Upkeep::run.
        self.upkeep
            .run(&self.session, crate::time::now_us(), yield_asked(slot));
        if woken || round.claimed > 0 || round.answered > 0 {
            self.last_work = Some(now);
        }
        if round.claimed > 0 {
            self.upkeep.note_work();
        }
        let asked = yield_asked(slot);
        if asked && round.held_back && !self.delivery.sending() {
            // webhook queues not served for the handover may have jobs due,
            // which no commit will announce: back in line
            want_again(self.database, now);
            exit_cleanly();
        }
        let own_work = wake::take_own_work() && round.claimed > 0;
        match decisions::after_round(asked, self.batches, round.more, own_work) {
            // its turn is over: at_exit puts the database back in line (not
            // while webhook requests are open: their outcomes are recorded
            // first)
            AfterRound::Leave if !self.delivery.sending() => exit_cleanly(),
            AfterRound::Leave => AfterRound::Leave,
            after => after,
        }
    }

    /// After a round with nothing more to do now: it gives its slot up when
    /// it has been idle long enough (decisions::leaves_idle), or sleeps on
    /// its latch until the next job falls due, the poll interval ends, its
    /// upkeep is due or (with webhook requests open) an answer comes back.
    fn rest(&mut self) {
        let now = crate::time::now_us();
        let next_due = session::transaction(|| self.session.tables(delivery::next_due));
        // Jobs left in flight that wait for a rate window are due then.
        let next_due = match self.recover_at {
            Some(at) if !self.recovered => Some(next_due.map_or(at, |due| due.min(at))),
            _ => next_due,
        };
        let asked = yield_asked(self.slot);
        let idle_us = crate::time::seconds(gucs::IDLE_EXIT_S.get());
        let nothing_due = next_due.is_none_or(|due| due > now);
        if !self.delivery.sending()
            && decisions::leaves_idle(
                asked,
                nothing_due,
                self.last_work.map(|at| now - at),
                idle_us,
            )
        {
            // When maintenance is owed, its visit's worker asks instead.
            let cleanup = match self.upkeep.owed_at() {
                Some(_) => None,
                None => session::transaction(|| self.session.tables(delivery::next_cleanup)),
            };
            if give_up_slot(
                self.slot,
                self.database,
                next_due,
                cleanup,
                &self.upkeep,
                now,
            ) {
                exit_cleanly();
            }
        }
        let until_idle = self.last_work.map_or(0, |at| (at + idle_us - now).max(0));
        // a due time already past that this round could not serve (its job
        // is locked by someone) is looked at again a little later
        let until_due = next_due.map_or(i64::MAX, |due| (due - now).max(decisions::MIN_SLEEP_US));
        let timeout_us = (gucs::POLL_INTERVAL_MS.get() as i64 * 1000)
            .min(until_idle)
            .min(until_due)
            .min(self.upkeep.next_at() - now)
            .max(1000);
        self.next_round_at = now + timeout_us;
        // While webhook requests are open, an outcome coming back ends the
        // sleep too: the top of the loop records it.
        if self.delivery.sending() {
            sleep_us(
                timeout_us.min(decisions::SENDING_WAIT_US),
                self.delivery.answered_fd(),
            );
        } else {
            sleep_us(timeout_us, None);
        }
    }
}

/// A helper's life (queue.max_workers_per_database): rounds of its
/// database's SQL senders back to back while they find full batches,
/// beside the database's worker, which alone wakes on commits, keeps the
/// upkeep and serves webhook queues. It leaves once a round finds no full
/// batch, and as soon as another database waits or it is asked to go.
fn help(slot: usize, mut session: Session) -> ! {
    let mut delivery = Delivery::new(slot);
    loop {
        pgrx::check_for_interrupts!();
        reload_if_asked();
        let now = crate::time::now_us();
        let others_wait = SHARED.share().waiting_for_worker(now).next().is_some();
        if stop_requested(slot) || yield_asked(slot) || !gucs::ENABLED.get() || others_wait {
            leave_helping(slot);
        }
        session = match session::transaction(|| Session::find(Some(session))) {
            Some(found) => found,
            None => leave_helping(slot),
        };
        // Webhook queues are held back: their worker keeps max_in_flight.
        let round = delivery.round(&session, true, || stop_requested(slot));
        if !round.more {
            leave_helping(slot);
        }
    }
}

/// Reloads the configuration after a SIGHUP (on_sighup), from a worker's
/// main loop.
fn reload_if_asked() {
    // SAFETY: ConfigReloadPending is a sig_atomic_t that on_sighup sets;
    // read and cleared on the main thread, and the configuration reloaded
    // from the worker's main loop, outside any transaction and any signal
    // handler, as PostgreSQL's own processes do.
    unsafe {
        if pg_sys::ConfigReloadPending != 0 {
            pg_sys::ConfigReloadPending = 0;
            pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
        }
    }
}

/// A helper leaves: its database's worker is there for what is left, and
/// is woken for the jobs that the helper's own deliveries made due.
fn leave_helping(slot: usize) -> ! {
    if wake::take_own_work() {
        // SAFETY: MyDatabaseId is set when the helper connected to its
        // database and never changes after.
        wake::wake_worker(unsafe { pg_sys::MyDatabaseId });
    }
    SHARED.exclusive().workers[slot].state = State::Stopping;
    exit_cleanly()
}

/// Whether the worker in `slot` is the only one of `database`.
fn alone(slot: usize, database: Oid) -> bool {
    SHARED.share().workers_of(database).all(|s| s == slot)
}

/// After a round: whether the database is busy (the round found full
/// batches), for the launcher's helpers, which it is told of when that
/// changes. Returns whether the database is recovered (a helper's failure
/// can make it not).
fn note_round(database: Oid, busy: bool) -> bool {
    let mut shared = SHARED.exclusive();
    let launcher = shared.launcher_procno;
    let Some(entry) = shared.database_mut(database) else {
        return true;
    };
    let was_busy = std::mem::replace(&mut entry.busy, busy);
    let recovered = entry.recovered;
    if busy && !was_busy {
        shared::set_latch(launcher);
    }
    recovered
}

/// The worker leaves with jobs of its database due: the database waits in
/// line for a worker again.
fn want_again(database: Oid, now: i64) {
    if let Some(entry) = SHARED.exclusive().database_mut(database) {
        entry.want(now);
    }
}

/// Sleeps on the worker's latch (set by committing transactions) for up to
/// `timeout_us`, and until `answered` (the dispatcher's descriptor) is
/// readable, when given.
fn sleep_us(timeout_us: i64, answered: Option<std::os::fd::RawFd>) {
    let mut events = pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH;
    if answered.is_some() {
        events |= pg_sys::WL_SOCKET_READABLE;
    }
    // SAFETY: MyLatch is this process's own latch, set before any of our
    // code runs; the descriptor, when given, is the dispatcher's eventfd,
    // open while the dispatcher lives (as long as the worker); the timeout
    // is at least a millisecond and fits a long; WL_EXIT_ON_PM_DEATH is
    // given, as a background worker must.
    unsafe {
        pg_sys::WaitLatchOrSocket(
            pg_sys::MyLatch,
            events as i32,
            answered.unwrap_or(-1),
            (timeout_us / 1000).max(1) as _,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
}

/// Takes in a wake-up sent by a commit, if one came, and records how long
/// it took to arrive.
fn take_wake(slot: usize, now: i64) -> bool {
    let mut shared = SHARED.exclusive();
    let sent = shared.wakes[slot].load(Ordering::Relaxed);
    let me = &mut shared.workers[slot];
    let woken = sent > me.wake_seen_at;
    if woken {
        me.wake_seen_at = sent;
        me.last_active_at = now;
        shared.record_latency(now - sent);
    }
    woken
}

/// A database command asked this worker to go, or the workers are off.
fn stop_requested(slot: usize) -> bool {
    SHARED.share().workers[slot].stop
}

/// The launcher wants this slot for a database that waits.
fn yield_asked(slot: usize) -> bool {
    SHARED.share().workers[slot].yield_asked
}

fn set_installed(database: Oid, installed: Installed) {
    let shared = SHARED.share();
    if let Some(entry) = shared.database(database) {
        entry.set_installed(installed);
        if installed == Installed::No {
            entry.wanted_since.store(0, Ordering::Relaxed);
        }
    }
}

/// Nothing is due: the database no longer wants a worker until its next
/// job (`next_due`) or its next cleanup (`cleanup`, put off to a quiet
/// database's pace), unless a commit woke this worker in the meantime
/// (then it stays).
fn give_up_slot(
    slot: usize,
    database: Oid,
    next_due: Option<i64>,
    cleanup: Option<i64>,
    upkeep: &Upkeep,
    now: i64,
) -> bool {
    let mut shared = SHARED.exclusive();
    if shared.wakes[slot].load(Ordering::Relaxed) > shared.workers[slot].wake_seen_at {
        return false;
    }
    shared.workers[slot].state = State::Stopping;
    if let Some(entry) = shared.database_mut(database) {
        entry.wanted_since.store(0, Ordering::Relaxed);
        // the upkeep owed (maintenance, or a retention cleanup), for the
        // worker of the visit it asks for
        let owed =
            decisions::upkeep_owed(cleanup, upkeep.owed_at(), now, super::upkeep::quiet_us());
        entry.upkeep_at.store(owed.unwrap_or(0), Ordering::Relaxed);
        entry
            .due_at
            .store(decisions::next_visit(next_due, owed), Ordering::Relaxed);
    }
    true
}

fn exit_cleanly() -> ! {
    CLEAN_EXIT.set(true);
    versions::exit_process(0)
}

/// What PostgreSQL's die() does for a background worker: the next
/// CHECK_FOR_INTERRUPTS, in our loop or inside a statement, ends the
/// process with FATAL.
///
/// # Safety
///
/// Only the kernel calls it, as this process's SIGTERM handler.
unsafe extern "C-unwind" fn on_sigterm(_signal: std::ffi::c_int) {
    // SAFETY: the flags are sig_atomic_t, which a signal handler may write,
    // as die() does (volatile, so that the write is not put off); SetLatch
    // may be called from a signal handler, and MyLatch is set before the
    // handler is installed. errno is the interrupted code's, kept as die()
    // keeps it.
    unsafe {
        let errno = *libc::__errno_location();
        std::ptr::write_volatile(&raw mut pg_sys::InterruptPending, 1);
        std::ptr::write_volatile(&raw mut pg_sys::ProcDiePending, 1);
        pg_sys::SetLatch(pg_sys::MyLatch);
        *libc::__errno_location() = errno;
    }
}

/// Notes a SIGHUP for the main loop, as SignalHandlerForConfigReload does.
///
/// # Safety
///
/// Only the kernel calls it, as this process's SIGHUP handler.
unsafe extern "C-unwind" fn on_sighup(_signal: std::ffi::c_int) {
    // SAFETY: as in on_sigterm: a sig_atomic_t flag, SetLatch on this
    // process's latch, and errno kept.
    unsafe {
        let errno = *libc::__errno_location();
        std::ptr::write_volatile(&raw mut pg_sys::ConfigReloadPending, 1);
        pg_sys::SetLatch(pg_sys::MyLatch);
        *libc::__errno_location() = errno;
    }
}

/// Runs on every exit, FATAL ones included: the slot is left for the
/// launcher to free, and a wake-up that arrived too late, or a turn that
/// was cut short, keeps the database in the line for a worker.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the before_shmem_exit callback registered
/// in queue_worker_main, with the worker's slot; shared memory is still
/// attached then.
#[pg_guard]
unsafe extern "C-unwind" fn at_exit(_code: i32, arg: pg_sys::Datum) {
    let slot = arg.value();
    let now = crate::time::now_us();
    let mut shared = SHARED.exclusive();
    let me = shared.workers[slot];
    let missed_wake = shared.wakes[slot].load(Ordering::Relaxed) > me.wake_seen_at;
    // left with work still due (its turn is over, or it was stopped): back
    // to the end of the line
    let work_left = me.state != State::Stopping;
    shared.workers[slot].state = State::Exited;
    shared.workers[slot].clean_exit = CLEAN_EXIT.get() || me.stop;
    if let Some(entry) = shared.database_mut(me.database) {
        if (missed_wake || work_left) && entry.installed() != Installed::No {
            entry.want(now);
        }
        if !me.helper {
            // No helper starts for a database without its worker.
            entry.busy = false;
        }
        // an exit in the middle of a round (an error, SIGTERM) may leave
        // jobs in flight: the next worker looks for them
        if !CLEAN_EXIT.get() {
            entry.recovered = false;
        }
    }
    if shared.launcher_procno >= 0 {
        shared::set_latch(shared.launcher_procno);
    }
}
