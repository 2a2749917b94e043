//! Which of a schedule's due ticks fire (API.md, `catch_up`). A tick is
//! *missed* when it fell due while nothing could fire it: before the server
//! started, or while the schedule was paused (`missed_before` is the later
//! of the two). Missed ticks follow `catch_up`; a tick due since then fires,
//! however late a worker comes to it (a database that waited for a worker
//! slot loses no tick).

use super::cron::Pattern;
use super::ticks;
use chrono_tz::Tz;

/// The most jobs one schedule enqueues in one firing, and the most missed
/// ticks 'all' catches up.
pub const MAX_FIRED: usize = 1_000;

/// The most ticks one firing walks through; a schedule further behind is
/// walked in several, each skipping the oldest missed ones.
const MAX_WALKED: usize = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CatchUp {
    None,
    One,
    All,
}

impl CatchUp {
    /// One of contract::CATCH_UP_WORDS.
    pub fn parse(word: &str) -> Option<CatchUp> {
        match word {
            "none" => Some(CatchUp::None),
            "one" => Some(CatchUp::One),
            "all" => Some(CatchUp::All),
            _ => None,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    /// The ticks that get a job, oldest first.
    pub fire: Vec<i64>,
    /// Ticks passed over (missed ones `catch_up` does not run).
    pub skipped: i64,
    /// The first tick not dealt with: the schedule's next_run_at.
    pub next: Option<i64>,
}

/// What to do at `now` for a schedule whose first unfired tick is `first`.
pub fn plan(
    pattern: &Pattern,
    tz: Tz,
    first: i64,
    now: i64,
    missed_before: i64,
    catch_up: CatchUp,
) -> Plan {
    let mut missed = Vec::new();
    let mut late = Vec::new();
    let mut next = Some(first);
    while let Some(at) = next {
        if at > now || missed.len() + late.len() == MAX_WALKED || late.len() == MAX_FIRED {
            break;
        }
        if at < missed_before {
            missed.push(at);
        } else {
            late.push(at);
        }
        next = ticks::next_after(pattern, tz, at);
    }
    let walked_all_missed = !late.is_empty() || next.is_none_or(|at| at >= missed_before);
    if !walked_all_missed {
        // more missed ticks than one firing walks: pass over the oldest, and
        // keep the last MAX_FIRED for the next firing to decide on
        let keep = missed.split_off(missed.len() - MAX_FIRED);
        return Plan {
            fire: Vec::new(),
            skipped: missed.len() as i64,
            next: keep.first().copied(),
        };
    }
    let run = match catch_up {
        CatchUp::None => 0,
        CatchUp::One => missed.len().min(1),
        CatchUp::All => missed.len().min(MAX_FIRED),
    };
    let kept = missed.split_off(missed.len() - run);
    let mut fire = kept;
    fire.extend(late);
    Plan {
        fire,
        skipped: missed.len() as i64,
        next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedules::cron::parse;

    const S: i64 = 1_000_000;

    fn every_second(first: i64, now: i64, missed_before: i64, catch_up: CatchUp) -> Plan {
        let pattern = parse("* * * * * *").unwrap();
        plan(
            &pattern,
            chrono_tz::UTC,
            first,
            now,
            missed_before,
            catch_up,
        )
    }

    #[test]
    fn late_ticks_all_fire_and_missed_ones_follow_catch_up() {
        // ticks 10..=20 due; 10..=14 missed (the server started at 15)
        let late: Vec<i64> = (15..=20).map(|s| s * S).collect();
        let none = every_second(10 * S, 20 * S, 15 * S, CatchUp::None);
        assert_eq!(
            (none.fire, none.skipped, none.next),
            (late.clone(), 5, Some(21 * S))
        );
        let one = every_second(10 * S, 20 * S, 15 * S, CatchUp::One);
        let mut with_last = vec![14 * S];
        with_last.extend(&late);
        assert_eq!((one.fire, one.skipped), (with_last, 4));
        let all = every_second(10 * S, 20 * S, 15 * S, CatchUp::All);
        assert_eq!(
            (all.fire, all.skipped),
            ((10..=20).map(|s| s * S).collect(), 0)
        );
    }

    #[test]
    fn nothing_due_changes_nothing() {
        let p = every_second(30 * S, 20 * S, 0, CatchUp::All);
        assert_eq!((p.fire.len(), p.skipped, p.next), (0, 0, Some(30 * S)));
    }

    #[test]
    fn all_catches_up_at_most_a_thousand() {
        // ticks 0..=4999 all missed
        let p = every_second(0, 4_999 * S, 5_000 * S, CatchUp::All);
        assert_eq!(p.fire.len(), MAX_FIRED);
        assert_eq!(p.fire[0], 4_000 * S);
        assert_eq!(p.skipped, 4_000);
        assert_eq!(p.next, Some(5_000 * S));
        let p = every_second(0, 4_999 * S, 5_000 * S, CatchUp::One);
        assert_eq!((p.fire, p.skipped), (vec![4_999 * S], 4_999));
    }

    #[test]
    fn a_long_downtime_is_walked_in_several_firings() {
        let end = 250_000 * S;
        let mut first = 0;
        let mut skipped = 0;
        let mut firings = 0;
        loop {
            firings += 1;
            let p = every_second(first, end, end, CatchUp::One);
            skipped += p.skipped;
            first = p.next.unwrap();
            if !p.fire.is_empty() {
                assert_eq!(p.fire, vec![end - S, end]);
                break;
            }
        }
        assert_eq!((skipped, first, firings), (249_999, end + S, 3));
    }

    #[test]
    fn late_ticks_fire_a_thousand_at_a_time() {
        let p = every_second(0, 5_000 * S, 0, CatchUp::None);
        assert_eq!(
            (p.fire.len(), p.skipped, p.next),
            (MAX_FIRED, 0, Some(1_000 * S))
        );
    }
}
