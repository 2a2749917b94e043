//! Who is served, and when: the launcher's and the workers' decisions as
//! pure functions of what they know, so that they are tested without a
//! server. How long a failing database waits, which workers are asked to
//! give their slots up, what a worker does after a round, and when a
//! database that its worker left needs one again.

/// A worker asked for its slot while jobs are due delivers this many
/// batches (counted from its start) before it leaves: a fair turn,
/// measured in work, so that a busy database neither holds a slot for long
/// nor pays a worker's start for every batch.
pub const TURN_BATCHES: usize = 10;

/// The pause before a database whose worker failed is served again: 1 s,
/// doubling with each failure in a row, at most this.
const MAX_FAILURE_PAUSE_US: i64 = 60 * crate::time::SECOND_US;
const FIRST_FAILURE_PAUSE_US: i64 = crate::time::SECOND_US;

/// How long a database whose worker did not exit on purpose `failures`
/// times in a row waits for the next one, so that a failing database is
/// never restarted in a loop.
pub fn failure_pause_us(failures: u32) -> i64 {
    (FIRST_FAILURE_PAUSE_US << failures.saturating_sub(1).min(6)).min(MAX_FAILURE_PAUSE_US)
}

/// The database to start a worker for next, among those that wait, as
/// (oid, since when it waits, no worker before): the one waiting longest
/// whose pause after a failure is over.
pub fn next_in_line<T: Copy>(waiting: impl Iterator<Item = (T, i64, i64)>, now: i64) -> Option<T> {
    waiting
        .filter(|&(_, _, not_before)| not_before <= now)
        .min_by_key(|&(_, since, _)| since)
        .map(|(database, _, _)| database)
}

/// A running worker as the launcher weighs it when databases wait.
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    pub slot: usize,
    /// Delivering now or still starting (else idle, sleeping on its latch).
    pub busy: bool,
    /// When it started, for a busy one; when it last worked, for an idle one.
    pub since: i64,
}

/// The slots whose workers are asked to give them up: as many as databases
/// wait beyond the free slots and the workers already leaving; idle ones
/// first, least recently active first (they leave at once), then busy ones,
/// the longest serving first (they leave once their turn is over).
pub fn to_ask(
    waiting: usize,
    free: usize,
    leaving: usize,
    mut candidates: Vec<Candidate>,
) -> Vec<usize> {
    let needed = waiting.saturating_sub(free + leaving);
    candidates.sort_by_key(|c| (c.busy, c.since));
    candidates
        .into_iter()
        .take(needed)
        .map(|c| c.slot)
        .collect()
}

/// How long a worker asked for its slot waits for its open webhook
/// requests before it leaves them to the next worker.
pub const HANDOVER_GRACE_US: i64 = 2 * crate::time::SECOND_US;

/// The longest a worker with webhook requests open sleeps (an outcome
/// coming back wakes it before).
pub const SENDING_WAIT_US: i64 = 100_000;

/// The least a worker sleeps when a round found nothing it could do.
pub const MIN_SLEEP_US: i64 = 100_000;

/// What a worker knows at the top of its loop (serve.rs).
#[derive(Clone, Copy, Debug)]
pub struct Moment {
    pub now: i64,
    /// It is asked to stop, or queue.enabled is off.
    pub stop: bool,
    /// Webhook requests are open.
    pub sending: bool,
    /// The launcher wants its slot.
    pub asked: bool,
    /// Answers came back since it last looked (read only while sending and
    /// asked).
    pub answered: bool,
    /// A commit woke it.
    pub woken: bool,
    pub next_round_at: i64,
    /// When the answers that came back are worth a transaction (Some(0): at
    /// once; None: none came back).
    pub record_in_us: Option<i64>,
    /// Since when, asked for its slot, it waits for its open requests.
    pub handover_from: Option<i64>,
}

/// The worker's next step.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Step {
    /// It leaves, handing open requests back.
    Stop,
    /// Asked for its slot, it leaves its open requests to the next worker:
    /// none has been answered for HANDOVER_GRACE_US.
    HandOver,
    /// It waits on its open requests only (no commit woke it, the round's
    /// time has not come) for this long, or until one is answered.
    AwaitAnswers { for_us: i64 },
    /// It records the answers that came back and fills the room they make.
    Refill,
    /// A round of every queue.
    Round,
}

/// The step a worker takes at `m`, and since when it waits to hand its
/// open requests over (a handover's grace starts when it is asked with
/// requests open, and again at each answer).
pub fn next_step(m: &Moment) -> (Step, Option<i64>) {
    if m.stop {
        return (Step::Stop, m.handover_from);
    }
    let handover_from = if !m.sending {
        None
    } else if m.asked {
        let since = m.handover_from.unwrap_or(m.now);
        if m.answered {
            Some(m.now)
        } else if m.now - since >= HANDOVER_GRACE_US {
            return (Step::HandOver, Some(since));
        } else {
            Some(since)
        }
    } else {
        m.handover_from
    };
    if m.sending && !m.woken && m.now < m.next_round_at {
        if m.record_in_us == Some(0) {
            return (Step::Refill, handover_from);
        }
        let until = (m.next_round_at - m.now)
            .min(SENDING_WAIT_US)
            .min(m.record_in_us.unwrap_or(i64::MAX));
        let for_us = match handover_from {
            Some(since) => until.min(since + HANDOVER_GRACE_US - m.now),
            None => until,
        };
        return (Step::AwaitAnswers { for_us }, handover_from);
    }
    (Step::Round, handover_from)
}

/// What a worker does after a round.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AfterRound {
    /// Its turn is over: it leaves, and its database waits in line again.
    Leave,
    /// Another round at once: a batch came back full.
    Again,
    /// Nothing more now: see whether to leave idle, else sleep.
    Rest,
}

/// `asked`: the launcher wants the slot; `batches`: delivered since the
/// worker started; `more`: a batch was full; `own_work`: the round's own
/// commits made jobs due (a child released by the end of its last parent,
/// a job a sender enqueued), which no wake-up announces to the worker that
/// committed them. (After a round whose batches were not full nothing was
/// left due at their claims; a job that another session's commit made due
/// since has set the worker's latch, and a worker with a wake-up it has not
/// taken in never leaves.)
pub fn after_round(asked: bool, batches: usize, more: bool, own_work: bool) -> AfterRound {
    if asked && batches >= TURN_BATCHES {
        AfterRound::Leave
    } else if more || own_work {
        AfterRound::Again
    } else {
        AfterRound::Rest
    }
}

/// Whether a resting worker gives its slot up: only when nothing is due
/// now, and then at once when the launcher asks or when it has had no work
/// since it started for a visit (`idle_for_us` None), else after idle_exit
/// without work (a steady trickle of jobs keeps its worker).
pub fn leaves_idle(
    asked: bool,
    nothing_due: bool,
    idle_for_us: Option<i64>,
    idle_exit_us: i64,
) -> bool {
    nothing_due && (asked || idle_for_us.is_none_or(|idle| idle >= idle_exit_us))
}

/// When the upkeep of a database whose worker leaves at `now` is owed, if
/// it is: its next retention cleanup, or the maintenance the worker owes,
/// whichever comes first, put off to `quiet_us` from now at the earliest,
/// so that jobs expiring one after another in a database nobody uses are
/// removed a batch at a time, and maintenance happens after a burst rather
/// than during it.
pub fn upkeep_owed(
    cleanup: Option<i64>,
    maintenance: Option<i64>,
    now: i64,
    quiet_us: i64,
) -> Option<i64> {
    [cleanup, maintenance]
        .into_iter()
        .flatten()
        .min()
        .map(|at| at.max(now + quiet_us))
}

/// When a database whose worker leaves needs one again (0: never, until a
/// commit asks): its next scheduled job or lease (`next_due`), or its
/// upkeep (`upkeep_owed`), whichever comes first.
pub fn next_visit(next_due: Option<i64>, upkeep: Option<i64>) -> i64 {
    [next_due, upkeep]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0)
        .max(0)
}

/// When a worker that starts at `now` first runs queue_maintain(): when
/// its database's last worker said it would be due (`recorded`), else one
/// `interval` later, so that a database served by one short-lived worker
/// after another does not run it at every start.
pub fn first_maintenance(now: i64, recorded: i64, interval: i64) -> i64 {
    if recorded > 0 {
        recorded
    } else {
        now + interval
    }
}

/// Whether queue_maintain(), due at `due`, runs at `now`: when due and
/// `owed` (jobs moved since it last ran), unless the worker is in a `hurry`
/// (another database waits for its slot); in a hurry, or when nothing is
/// owed (its retention cleanup may still find jobs past retention), only once it
/// is overdue by `grace`.
pub fn maintenance_due(now: i64, due: i64, owed: bool, hurry: bool, grace: i64) -> bool {
    now >= if owed && !hurry {
        due
    } else {
        due.saturating_add(grace)
    }
}

/// When queue_maintain() runs next after a run at `now` whose cleanup
/// removed `cleaned` jobs: soon while it finds any (queue_cleanup() takes a
/// bounded chunk per call, and is called until it finds none), else one
/// `interval` later.
pub fn next_maintenance(cleaned: i64, now: i64, interval: i64) -> i64 {
    const AGAIN_SOON_US: i64 = crate::time::SECOND_US;
    now + if cleaned > 0 { AGAIN_SOON_US } else { interval }
}

#[cfg(test)]
mod tests {
    /// A worker at 10 s with nothing open, not asked, its round due.
    fn quiet() -> Moment {
        Moment {
            now: 10_000_000,
            stop: false,
            sending: false,
            asked: false,
            answered: false,
            woken: false,
            next_round_at: 10_000_000,
            record_in_us: None,
            handover_from: None,
        }
    }

    #[test]
    fn a_stop_comes_first() {
        let m = Moment {
            stop: true,
            sending: true,
            asked: true,
            ..quiet()
        };
        assert_eq!(next_step(&m).0, Step::Stop);
    }

    #[test]
    fn without_open_requests_a_worker_goes_round_and_forgets_a_handover() {
        let m = Moment {
            handover_from: Some(1),
            asked: true,
            ..quiet()
        };
        assert_eq!(next_step(&m), (Step::Round, None));
    }

    #[test]
    fn with_open_requests_it_waits_for_answers_until_its_round() {
        let m = Moment {
            sending: true,
            next_round_at: 10_050_000,
            ..quiet()
        };
        assert_eq!(next_step(&m), (Step::AwaitAnswers { for_us: 50_000 }, None));
        let far = Moment {
            next_round_at: 20_000_000,
            record_in_us: Some(2_000),
            ..m
        };
        assert_eq!(next_step(&far).0, Step::AwaitAnswers { for_us: 2_000 });
        let answered = Moment {
            record_in_us: Some(0),
            ..m
        };
        assert_eq!(next_step(&answered).0, Step::Refill);
        // a commit, or the round's time, makes it go round
        assert_eq!(next_step(&Moment { woken: true, ..m }).0, Step::Round);
        assert_eq!(
            next_step(&Moment {
                next_round_at: 9_000_000,
                ..m
            })
            .0,
            Step::Round
        );
    }

    #[test]
    fn asked_with_open_requests_it_hands_them_over_after_a_silent_grace() {
        let asked = Moment {
            sending: true,
            asked: true,
            next_round_at: 20_000_000,
            ..quiet()
        };
        // the grace starts now, and bounds the wait
        assert_eq!(
            next_step(&asked),
            (
                Step::AwaitAnswers {
                    for_us: SENDING_WAIT_US
                },
                Some(10_000_000)
            )
        );
        let late = Moment {
            now: 10_000_000 + HANDOVER_GRACE_US - 30_000,
            handover_from: Some(10_000_000),
            ..asked
        };
        assert_eq!(next_step(&late).0, Step::AwaitAnswers { for_us: 30_000 });
        let over = Moment {
            now: 10_000_000 + HANDOVER_GRACE_US,
            ..late
        };
        assert_eq!(next_step(&over), (Step::HandOver, Some(10_000_000)));
        // an answer starts the grace again
        let answered = Moment {
            answered: true,
            ..over
        };
        assert_eq!(next_step(&answered).1, Some(over.now));
    }

    use super::*;

    const S: i64 = 1_000_000;

    #[test]
    fn a_failing_database_waits_longer_each_time_up_to_a_minute() {
        let pauses: Vec<i64> = (1..=9).map(|n| failure_pause_us(n) / S).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(failure_pause_us(u32::MAX), 60 * S);
    }

    #[test]
    fn the_longest_waiting_database_is_served_next_unless_paused() {
        let now = 100;
        let line = [("a", 50, 0), ("b", 10, 200), ("c", 20, 100), ("d", 30, 0)];
        assert_eq!(next_in_line(line.into_iter(), now), Some("c"));
        assert_eq!(next_in_line(line.into_iter(), 1_000), Some("b"));
        assert_eq!(next_in_line(line[..1].iter().copied(), now), Some("a"));
        assert_eq!(next_in_line(line[1..2].iter().copied(), now), None);
    }

    fn idle(slot: usize, since: i64) -> Candidate {
        Candidate {
            slot,
            busy: false,
            since,
        }
    }

    fn busy(slot: usize, since: i64) -> Candidate {
        Candidate {
            slot,
            busy: true,
            since,
        }
    }

    #[test]
    fn idle_workers_are_asked_first_then_the_longest_serving() {
        let workers = vec![busy(0, 5), idle(1, 30), busy(2, 1), idle(3, 10)];
        assert_eq!(to_ask(1, 0, 0, workers.clone()), [3]);
        assert_eq!(to_ask(2, 0, 0, workers.clone()), [3, 1]);
        assert_eq!(to_ask(3, 0, 0, workers.clone()), [3, 1, 2]);
        assert_eq!(to_ask(10, 0, 0, workers), [3, 1, 2, 0]);
    }

    #[test]
    fn nobody_is_asked_while_free_slots_or_leaving_workers_cover_the_line() {
        let workers = vec![idle(0, 1), idle(1, 2)];
        assert!(to_ask(0, 0, 0, workers.clone()).is_empty());
        assert!(to_ask(2, 2, 0, workers.clone()).is_empty());
        assert!(to_ask(2, 1, 1, workers.clone()).is_empty());
        assert_eq!(to_ask(3, 1, 1, workers), [0]);
    }

    #[test]
    fn a_worker_asked_to_leave_finishes_its_turn_first() {
        use AfterRound::*;
        // not asked: full batches go on, anything else rests
        assert_eq!(after_round(false, 50, true, false), Again);
        assert_eq!(after_round(false, 50, false, false), Rest);
        // asked: leaves once its turn of batches is over, whatever is due
        assert_eq!(after_round(true, TURN_BATCHES, true, false), Leave);
        assert_eq!(after_round(true, TURN_BATCHES - 1, true, false), Again);
        assert_eq!(after_round(true, TURN_BATCHES, false, true), Leave);
        // asked before its turn is over: goes on while batches are full,
        // else rests (and leaves, when nothing is due)
        assert_eq!(after_round(true, 1, false, false), Rest);
    }

    #[test]
    fn a_round_whose_commits_made_jobs_due_is_followed_by_another() {
        use AfterRound::*;
        // a chain: each delivery releases the next job, which no commit of
        // another session announces
        assert_eq!(after_round(false, 1, false, true), Again);
        assert_eq!(after_round(true, 1, false, true), Again);
    }

    #[test]
    fn a_resting_worker_leaves_only_when_nothing_is_due() {
        assert!(leaves_idle(true, true, Some(0), 60 * S));
        assert!(!leaves_idle(true, false, Some(0), 60 * S));
        assert!(!leaves_idle(false, true, Some(59 * S), 60 * S));
        assert!(leaves_idle(false, true, Some(60 * S), 60 * S));
        assert!(!leaves_idle(false, false, Some(600 * S), 60 * S));
        // a worker that has had no work (a visit) leaves once nothing is due
        assert!(leaves_idle(false, true, None, 60 * S));
        assert!(!leaves_idle(false, false, None, 60 * S));
    }

    #[test]
    fn maintenance_runs_when_the_last_worker_said_and_again_soon_while_it_cleans() {
        let (now, interval) = (1_000 * S, 10 * S);
        assert_eq!(first_maintenance(now, 0, interval), now + interval);
        assert_eq!(first_maintenance(now, now - 5 * S, interval), now - 5 * S);
        assert_eq!(next_maintenance(0, now, interval), now + interval);
        assert_eq!(next_maintenance(10_000, now, interval), now + S);
        assert_eq!(next_maintenance(1, now, interval), now + S);
    }

    #[test]
    fn a_worker_in_a_hurry_puts_maintenance_off_but_not_for_ever() {
        let (due, grace) = (1_000 * S, 60 * S);
        // owed: when due, or a grace later in a hurry
        assert!(!maintenance_due(due - 1, due, true, false, grace));
        assert!(maintenance_due(due, due, true, false, grace));
        assert!(!maintenance_due(due + 59 * S, due, true, true, grace));
        assert!(maintenance_due(due + 60 * S, due, true, true, grace));
        // not owed: a grace later all the same (retention cleanup)
        assert!(!maintenance_due(due + 59 * S, due, false, false, grace));
        assert!(maintenance_due(due + 60 * S, due, false, false, grace));
    }

    #[test]
    fn a_database_left_is_visited_for_its_next_job_or_a_cleanup_put_off() {
        let now = 1_000 * S;
        let quiet = 60 * S;
        let visit = |due: Option<i64>, cleanup: Option<i64>| {
            next_visit(due, upkeep_owed(cleanup, None, now, quiet))
        };
        assert_eq!(visit(None, None), 0);
        assert_eq!(visit(Some(now + 5 * S), None), now + 5 * S);
        // a cleanup due now waits a quiet interval; one due later, till then
        assert_eq!(visit(None, Some(now - S)), now + quiet);
        assert_eq!(visit(None, Some(now + 3_600 * S)), now + 3_600 * S);
        // the earlier of the two
        assert_eq!(visit(Some(now + 5 * S), Some(now)), now + 5 * S);
        assert_eq!(visit(Some(now + 90 * S), Some(now)), now + quiet);
        // maintenance owed counts like a cleanup, the earlier of them
        assert_eq!(
            upkeep_owed(None, Some(now + 5 * S), now, quiet),
            Some(now + quiet)
        );
        assert_eq!(
            upkeep_owed(Some(now + 7_200 * S), Some(now + 3_600 * S), now, quiet),
            Some(now + 3_600 * S)
        );
        assert_eq!(upkeep_owed(None, None, now, quiet), None);
    }
}
