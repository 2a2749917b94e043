//! Claims that hold to a queue's order and limits (docs/groups.md):
//! `ordered`, `max_in_flight`, `group_max_in_flight`, `rate_limit` and
//! `group_rate_limit`. What is in flight is counted in `queue_live`, what
//! was claimed in a rate window in `queue_claims`, both written in the
//! claim's own transaction, so a crash or a failover keeps them as exact
//! as the jobs themselves. For a limit that counts, a claim takes its turn
//! first (`take_turn`), so that it also sees the claims under way beside
//! it: with limits of the queue as a whole, it reserves what it may take
//! and runs beside the others (reservations.rs); with a limit per group,
//! it runs alone under the queue's claim lock, seeing what the last one
//! took. An ordered queue needs no count: only a group's oldest unfinished
//! job may be claimed, while none of its group is in flight, one row, which
//! `FOR UPDATE SKIP LOCKED` hands to one claimer; without limits that count
//! it claims in one statement (ordered_heads.sql), which looks at the front
//! of the claim order only; when that comes back short, or a claim with
//! limits found too few in the first jobs it read and in a second, longer
//! read, what may go is found group by group (`group_firsts`).
//!
//! Every claim first takes the queue's rules lock (catalog::lock_rules),
//! which a change of the order or limits, and a retry that makes a group's
//! head, wait for. What a claim counts and chooses it reads as committed
//! now (db::look), also in a transaction with one snapshot for all its
//! statements, which would otherwise miss the claims committed since.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use pgrx::spi::SpiClient;

use crate::catalog::{self, Limits, Queue};
use crate::db::{self, args};
use crate::queries;
use crate::reservations::{self, Reserved};

/// What a claim may take.
pub enum Pick {
    /// The first this many ready jobs, whatever their group.
    Next(usize),
    /// These ready jobs, in claim order.
    These(Vec<i64>),
}

pub struct Chosen {
    pub pick: Pick,
    /// A limit kept some ready job back (or may have).
    pub held_back: bool,
}

/// Whether claims of a queue with these limits count jobs (in flight, or
/// in a window), and so must take turns (`take_turn`).
pub fn counted(limits: &Limits) -> bool {
    limits.max_in_flight.is_some()
        || limits.group_max_in_flight.is_some()
        || limits.rate.is_some()
        || limits.group_rate.is_some()
}

/// Whether a claim of a queue with these rules takes its turn and chooses
/// its jobs first (`take_turn`, `choose`): when its limits count, and for
/// an ordered queue in a transaction that does not read each statement in
/// a fresh snapshot, whose heads are then found as committed now
/// (db::look) rather than in its snapshot.
pub fn takes_turn(limits: &Limits) -> bool {
    counted(limits) || (limits.ordered && !db::read_committed())
}

/// How a claim of a queue whose limits count sees the others.
pub enum Turn {
    /// It holds the queue's claim lock alone until its transaction ends.
    Alone,
    /// It runs beside the claims that reserved too.
    Beside(Reserved),
    /// No claim: a look at whether one could take a job now, which counts
    /// only what has committed (queue_wait).
    Look,
}

/// A claim of up to `wanted` jobs of `queue`, whose limits count, takes
/// its turn. Beside the others when it can (`turn_beside`); alone
/// otherwise.
pub fn take_turn(queue: &Queue, wanted: usize) -> Turn {
    turn_beside(queue, wanted).unwrap_or_else(|| {
        catalog::lock_claims(queue.id, true);
        Turn::Alone
    })
}

/// The turn of a claim of up to `wanted` jobs of `queue` beside the
/// others: when every limit is the queue's as a whole, the transaction
/// reads committed rows afresh at each statement (a reservation must be
/// counted from a snapshot taken after it) and the table of reservations
/// has room. None, with nothing taken, otherwise. (The worker's delivery
/// in one transaction keeps its turn through its calls, which alone would
/// hold the queue's claim lock that long: sql_delivery.rs.)
pub fn turn_beside(queue: &Queue, wanted: usize) -> Option<Turn> {
    let limits = &queue.limits;
    let per_group = limits.group_max_in_flight.is_some() || limits.group_rate.is_some();
    if !db::read_committed() || per_group {
        return None;
    }
    let reserved = reservations::reserve(queue.id, wanted)?;
    catalog::lock_claims(queue.id, false);
    Some(Turn::Beside(reserved))
}

impl Turn {
    /// The claim took `jobs`.
    pub fn took(&self, jobs: usize) {
        if let Turn::Beside(reserved) = self {
            reserved.took(jobs);
        }
    }
}

/// How long claims stay in `queue_claims` past the longest window of their
/// queue (`note`). A claim counts the windows that end at its own time, read
/// once it has its turn and again after each wait; a claim beside it that
/// read the clock a little later must not delete claims it still counts.
/// Without the margin, a window could hold more claims than the rate allows.
const CLOCK_MARGIN_US: i64 = 10_000_000;

/// How often a backend removes the claims of a queue that have left every
/// window (`note`). Those claims are never read again (every look starts
/// at its window's start), so they may wait; removing them at every claim
/// walked, each time, past the index entries of those removed before,
/// until vacuum.
const SWEEP_EVERY_US: i64 = 1_000_000;

thread_local! {
    /// When this backend last removed old claims, per queue.
    static SWEPT: RefCell<HashMap<i32, i64>> = RefCell::new(HashMap::new());
}

/// Counts per group; the key None is the queue as a whole.
type Counts = HashMap<Option<String>, i64>;

/// Up to `wanted` ready jobs of `queue` that a claim at `now` may take
/// without passing a limit: the queue's room first, then the first ready
/// jobs in claim order whose group has room (and, in an ordered queue, that
/// are their group's oldest unfinished job). When the first ready jobs it
/// reads do not fill it, it reads further, and then the rest group by
/// group: each group's first jobs, or in an ordered queue each group's head
/// (`group_firsts`).
/// The caller has taken its `turn`.
/// `passed`: jobs someone else had locked, which are not chosen again.
pub fn choose(
    client: &mut SpiClient<'_>,
    queue: &Queue,
    turn: &Turn,
    wanted: usize,
    now: &mut i64,
    passed: &HashSet<i64>,
) -> Chosen {
    let limits = &queue.limits;
    let room = room_of_queue(client, queue, turn, wanted, now, true).max(0) as usize;
    let now = *now;
    let held_back = room < wanted;
    if room == 0 {
        return Chosen {
            pick: Pick::Next(0),
            held_back,
        };
    }
    // In an ordered queue only a group's oldest unfinished job is a candidate,
    // which is what one job of a group in flight at a time needs: a claim
    // counts a group's jobs in flight only for group_max_in_flight.
    let per_group = match limits.ordered {
        true => None,
        false => limits.group_max_in_flight.map(i64::from),
    };
    let group_rate = limits.group_rate.map(|(n, _)| i64::from(n));
    // every ready job is a candidate unless a group rule may refuse it
    if !limits.ordered && per_group.is_none() && group_rate.is_none() {
        return Chosen {
            pick: Pick::Next(room),
            held_back,
        };
    }
    let most_per_group = per_group
        .into_iter()
        .chain(group_rate)
        .chain([(room + passed.len()) as i64])
        .min();
    let first_scan = room * 2 + 16 + passed.len();
    // Reading on job by job could read a whole backlog of busy groups, each
    // of them at its limit or waiting for its head. The first look reads a
    // few more jobs than the claim wants; the second reads further, past the
    // jobs of groups that fell behind the others' turns while their jobs in
    // flight ran long; the last reads group by group.
    let looks = [
        Look::Read(first_scan),
        Look::Read((first_scan * FURTHER).max(FURTHER_AT_LEAST)),
        Look::ByGroup,
    ];
    for look in looks {
        let (candidates, read_all): (Vec<(i64, Option<String>, bool)>, bool) = match look {
            Look::Read(scan) => {
                let candidates: Vec<_> = db::look(
                    client,
                    &queries::CLAIM_CANDIDATES,
                    args![
                        queue_id = queue.id,
                        limit = scan.min(i32::MAX as usize) as i32,
                        ordered = limits.ordered
                    ],
                )
                .map(|r| (r.value("id"), r.get("group_key"), r.value("head")))
                .collect();
                let read_all = candidates.len() < scan;
                (candidates, read_all)
            }
            Look::ByGroup => (
                group_firsts(client, queue, room + passed.len(), most_per_group)
                    .into_iter()
                    .map(|(id, group)| (id, group, true))
                    .collect(),
                true,
            ),
        };
        let mut groups: Vec<String> = candidates.iter().filter_map(|c| c.1.clone()).collect();
        groups.sort_unstable();
        groups.dedup();
        let busy = match per_group {
            Some(_) if !groups.is_empty() => in_flight(client, queue.id, groups.clone()),
            _ => Counts::new(),
        };
        let used = match group_rate {
            Some(_) if !groups.is_empty() => rate_used(client, queue, now, groups),
            _ => Counts::new(),
        };
        let mut taken: HashMap<&str, i64> = HashMap::new();
        let mut ids = Vec::with_capacity(room);
        let mut skipped = false;
        for (id, group, head) in &candidates {
            if ids.len() == room {
                break;
            }
            if passed.contains(id) {
                continue;
            }
            let Some(group) = group else {
                // A job without a group is a group of its own.
                ids.push(*id);
                continue;
            };
            let key = Some(group.clone());
            let now_taken = taken.get(group.as_str()).copied().unwrap_or(0);
            let count = |counts: &Counts| counts.get(&key).copied().unwrap_or(0) + now_taken;
            let fits = *head
                && per_group.is_none_or(|max| count(&busy) < max)
                && group_rate.is_none_or(|n| count(&used) < n);
            if fits {
                ids.push(*id);
                *taken.entry(group.as_str()).or_default() += 1;
            } else {
                skipped = true;
            }
        }
        if ids.len() == room || read_all {
            return Chosen {
                pick: Pick::These(ids),
                held_back: held_back || skipped,
            };
        }
    }
    unreachable!("the look group by group reads every group")
}

/// A look of `choose`: the first this many ready jobs in claim order, or
/// each group's first jobs.
#[derive(Clone, Copy)]
enum Look {
    Read(usize),
    ByGroup,
}

/// How much further than its first look `choose` reads in its second, and
/// at least how many jobs: about 16 × the jobs it wants, as far as an
/// ordered claim looks for its front (ordered_front.sql). Past that, a walk
/// of the groups costs less than reading on (BENCHMARKS.md).
const FURTHER: usize = 8;
const FURTHER_AT_LEAST: usize = 256;

/// What a claim of `queue` may take, found group by group, in claim order
/// (group_firsts.sql): each group's head in an ordered queue, otherwise
/// each group's first `per_group` ready jobs; and the first `ungrouped`
/// jobs without a group of each priority. What a claim falls back on when
/// the front of the claim order did not fill it. Not locked.
pub fn group_firsts(
    client: &mut SpiClient<'_>,
    queue: &Queue,
    ungrouped: usize,
    per_group: Option<i64>,
) -> Vec<(i64, Option<String>)> {
    let per_group = per_group.unwrap_or(1).clamp(1, i64::from(i32::MAX)) as i32;
    db::look(
        client,
        &queries::GROUP_FIRSTS,
        args![
            queue_id = queue.id,
            limit = ungrouped.min(i32::MAX as usize) as i32,
            per_group = per_group,
            ordered = queue.limits.ordered
        ],
    )
    .map(|r| (r.value("id"), r.get("group_key")))
    .collect()
}

/// How many of `wanted` jobs a claim at `now` may take by the limits of
/// `queue` as a whole: its `max_in_flight` (when `in_flight_counts`: a job
/// claimed again is in flight already) and its `rate_limit`, less what
/// older claims under way beside it may take. When those would leave it
/// short, it waits for them to end, reads the clock again into `now` (a
/// claim's time must not fall behind the claims it waited for: see `note`)
/// and counts again. Negative: none.
fn room_of_queue(
    client: &mut SpiClient<'_>,
    queue: &Queue,
    turn: &Turn,
    wanted: usize,
    now: &mut i64,
    in_flight_counts: bool,
) -> i64 {
    let limits = &queue.limits;
    loop {
        // What older claims under way may take, read before the counts: what
        // they commit meanwhile is counted twice, never missed.
        let older = match turn {
            Turn::Beside(reserved) => Some(reserved.older()),
            Turn::Alone | Turn::Look => None,
        };
        let under_way = older.as_ref().map_or(0, |o| o.jobs);
        let mut room = wanted as i64;
        if let (Some(max), true) = (limits.max_in_flight, in_flight_counts) {
            let busy = in_flight(client, queue.id, Vec::new());
            let busy = busy.get(&None).copied().unwrap_or(0) + under_way;
            room = room.min(i64::from(max) - busy);
        }
        if let Some((n, _)) = limits.rate {
            let used = rate_used(client, queue, *now, Vec::new());
            let used = used.get(&None).copied().unwrap_or(0) + under_way;
            room = room.min(i64::from(n) - used);
        }
        match older {
            // room short by what older claims may take: once they have
            // ended, the counts say what they took (a transaction's second
            // claim takes what is left beside those that came after its
            // first: they may be waiting for it)
            Some(older) if room < wanted as i64 && older.can_wait() => {
                older.wait();
                *now = crate::time::now_us();
            }
            _ => return room,
        }
    }
}

/// A job of `group` that a stopped worker left in flight is to be claimed
/// again at `now`, read again once the claim has its turn
/// (sql_delivery::recover_one). It is in flight already, so
/// only the rate windows may hold it back, and its claim counts in them
/// (`note`). Returns the claim's turn (None: the queue has no rate limit),
/// or, when a window is full, when its first claim leaves it (the job
/// waits in flight until then).
pub fn turn_to_claim_again(
    client: &mut SpiClient<'_>,
    queue: &Queue,
    group: Option<&str>,
    now: &mut i64,
) -> Result<Option<Turn>, i64> {
    let limits = &queue.limits;
    if limits.rate.is_none() && limits.group_rate.is_none() {
        return Ok(None);
    }
    let turn = take_turn(queue, 1);
    *now = crate::time::now_us();
    let mut room = room_of_queue(client, queue, &turn, 1, now, false);
    let now = *now;
    if let (Some((n, _)), Some(group)) = (limits.group_rate, group) {
        let used = rate_used(client, queue, now, vec![group.to_string()]);
        room = room.min(i64::from(n) - used.get(&Some(group.to_string())).copied().unwrap_or(0));
    }
    if room > 0 {
        return Ok(Some(turn));
    }
    let frees_at = db::look(
        client,
        &queries::RATE_FREES,
        args![queue_id = queue.id, at = db::timestamp(now), group = group],
    )
    .first()
    .and_then(|r| r.get::<pgrx::datum::TimestampWithTimeZone>("at"))
    .map_or(now, |t| t.into_inner());
    Err(frees_at)
}

/// A claim at `now` took jobs of these groups (None: without one): the
/// rate windows of the queue count them. At most once a second per backend
/// (`SWEEP_EVERY_US`), the queue's claims past every window go.
pub fn note<'a>(
    client: &mut SpiClient<'_>,
    queue: &Queue,
    now: i64,
    claimed: impl Iterator<Item = Option<&'a str>>,
) {
    let limits = &queue.limits;
    if limits.rate.is_none() && limits.group_rate.is_none() {
        return;
    }
    let mut per_group: HashMap<Option<&str>, i32> = HashMap::new();
    let mut total = 0;
    for group in claimed {
        total += 1;
        if let (Some(group), Some(_)) = (group, limits.group_rate) {
            *per_group.entry(Some(group)).or_default() += 1;
        }
    }
    if total == 0 {
        return;
    }
    if limits.rate.is_some() {
        per_group.insert(None, total);
    }
    let (groups, jobs): (Vec<Option<String>>, Vec<i32>) = per_group
        .into_iter()
        .map(|(group, n)| (group.map(str::to_string), n))
        .unzip();
    db::run(
        client,
        &queries::RATE_NOTE,
        args![
            queue_id = queue.id,
            at = db::timestamp(now),
            groups = groups,
            jobs = jobs,
        ],
    );
    sweep(client, queue, now);
}

/// Removes the claims of `queue` that left its longest window
/// `CLOCK_MARGIN_US` before `now`, unless this backend did so less than
/// `SWEEP_EVERY_US` ago.
fn sweep(client: &mut SpiClient<'_>, queue: &Queue, now: i64) {
    let due = SWEPT.with_borrow_mut(|swept| {
        let last = swept.entry(queue.id).or_insert(i64::MIN);
        let due = now.saturating_sub(*last) >= SWEEP_EVERY_US;
        if due {
            *last = now;
        }
        due
    });
    if !due {
        return;
    }
    let limits = &queue.limits;
    let longest = limits
        .rate
        .iter()
        .chain(limits.group_rate.iter())
        .map(|(_, window)| *window)
        .max()
        .unwrap_or(0);
    db::run(
        client,
        &queries::RATE_SWEEP,
        args![
            queue_id = queue.id,
            before = db::timestamp(now - longest - CLOCK_MARGIN_US),
        ],
    );
}

/// Jobs in flight: of the queue (None) and of each of `groups`.
fn in_flight(client: &mut SpiClient<'_>, queue_id: i32, groups: Vec<String>) -> Counts {
    db::look(
        client,
        &queries::IN_FLIGHT,
        args![queue_id = queue_id, groups = groups],
    )
    .map(|r| (r.get("group_key"), r.value("busy")))
    .collect()
}

/// Jobs claimed in the rate windows that end at `now`: of the queue (None)
/// and of each of `groups`.
fn rate_used(client: &mut SpiClient<'_>, queue: &Queue, now: i64, groups: Vec<String>) -> Counts {
    let since = |rate: Option<(i32, i64)>| db::timestamp(now - rate.map_or(0, |(_, w)| w));
    db::look(
        client,
        &queries::RATE_USED,
        args![
            queue_id = queue.id,
            since = since(queue.limits.rate),
            group_since = since(queue.limits.group_rate),
            groups = groups,
        ],
    )
    .map(|r| (r.get("group_key"), r.value("used")))
    .collect()
}
