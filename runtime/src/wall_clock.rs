//! The wall clock, read as chrono's `Utc::now()` reads it, for less: every run stamps its record three times
//! and its outcome signal once, and a third of what `Utc::now()` costs is working out the date from the
//! seconds since 1970. A thread here remembers the day it last stamped, so only the first stamp of a day
//! works the date out. A fresh id and the time it was made come from one reading of the clock
//! ([`stamp`]), where `Uuid::now_v7()` beside `Utc::now()` would read it twice.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use std::cell::Cell;
use std::time::{Duration, SystemTime};
use uuid::Uuid;
use uuid::timestamp::context::ContextV7;

const SECONDS_A_DAY: u64 = 86_400;

thread_local! {
    /// The day (counted from 1970-01-01) this thread last stamped, with its date.
    static LAST_DAY: Cell<Option<(u64, NaiveDate)>> = const { Cell::new(None) };
    /// This thread's sequence of version 7 ids: each later than the one before, even within one millisecond
    /// (as `Uuid::now_v7()`'s are, without the lock that one sequence for every thread takes).
    static IDS: ContextV7 = const { ContextV7::new() };
}

/// A fresh version 7 id and the time now, both from one reading of the clock.
pub(crate) fn stamp() -> (Uuid, DateTime<Utc>) {
    let now = now();
    (id_at(now), now)
}

/// A fresh version 7 id that carries `at` (read from the clock just before): for a record or signal stamped
/// with a time already read.
pub(crate) fn id_at(at: DateTime<Utc>) -> Uuid {
    let seconds = u64::try_from(at.timestamp()).unwrap_or(0);
    let timestamp = |ids: &ContextV7| uuid::Timestamp::from_unix(ids, seconds, at.timestamp_subsec_nanos());
    Uuid::new_v7(IDS.with(timestamp))
}

/// The time now, in UTC: the same as `Utc::now()`.
pub(crate) fn now() -> DateTime<Utc> {
    match SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        Ok(since) => at(since),
        // A clock set before 1970: chrono works it out.
        Err(_) => Utc::now(),
    }
}

/// The instant `since` the Unix epoch, its date taken from this thread's last stamp when it is the same day.
fn at(since: Duration) -> DateTime<Utc> {
    let seconds = since.as_secs();
    let day = seconds / SECONDS_A_DAY;
    let date = LAST_DAY.with(|last| match last.get() {
        Some((known, date)) if known == day => Some(date),
        _ => {
            let date = i64::try_from(day * SECONDS_A_DAY)
                .ok()
                .and_then(|midnight| DateTime::from_timestamp(midnight, 0))
                .map(|midnight| midnight.date_naive())?;
            last.set(Some((day, date)));
            Some(date)
        }
    });
    let second_of_day = u32::try_from(seconds % SECONDS_A_DAY).unwrap_or(0);
    let time = NaiveTime::from_num_seconds_from_midnight_opt(second_of_day, since.subsec_nanos());
    match (date, time) {
        (Some(date), Some(time)) => NaiveDateTime::new(date, time).and_utc(),
        // Past the last date chrono can hold (the year 262,143): as late as it goes.
        _ => DateTime::<Utc>::MAX_UTC,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What chrono makes of the same instant.
    fn chrono_at(since: Duration) -> DateTime<Utc> {
        let seconds = i64::try_from(since.as_secs()).unwrap();
        DateTime::from_timestamp(seconds, since.subsec_nanos()).unwrap()
    }

    proptest! {
        /// Instants in any order, near each other (the same day, the next, the one before) and far apart, read
        /// as chrono reads them: a remembered day is never used for another.
        #[test]
        fn a_stamp_is_the_instant_chrono_makes(
            start in 0u64..253_402_300_000,
            steps in proptest::collection::vec((-200_000i64..200_000, 0u32..1_000_000_000), 1..40),
        ) {
            let mut seconds = start;
            for (step, nanos) in steps {
                seconds = seconds.saturating_add_signed(step).min(253_402_300_799);
                let since = Duration::new(seconds, nanos);
                prop_assert_eq!(at(since), chrono_at(since), "{:?}", since);
            }
        }
    }

    #[test]
    fn now_is_between_two_readings_of_chrono() {
        for _ in 0..1_000 {
            let before = Utc::now();
            let now = now();
            let after = Utc::now();
            assert!(before <= now && now <= after, "{before} <= {now} <= {after}");
        }
    }

    #[test]
    fn a_stamp_carries_its_time_and_ids_keep_their_order() {
        let mut last = Uuid::nil();
        for _ in 0..10_000 {
            let before = Utc::now();
            let (id, at) = stamp();
            let after = Utc::now();
            assert!(before <= at && at <= after, "{before} <= {at} <= {after}");
            assert_eq!(id.get_version_num(), 7);
            let (seconds, nanos) = id.get_timestamp().map(|t| t.to_unix()).unwrap();
            assert_eq!(
                i64::try_from(seconds).unwrap() * 1_000 + i64::from(nanos / 1_000_000),
                at.timestamp_millis(),
                "the id carries the stamp's millisecond"
            );
            assert!(id > last, "ids made one after another on a thread are in order: {last} then {id}");
            last = id;
        }
    }

    #[test]
    fn midnight_and_the_nanosecond_before_it_fall_on_their_own_days() {
        let midnight = Duration::from_secs(19_000 * SECONDS_A_DAY);
        let just_before = midnight - Duration::from_nanos(1);
        for since in [just_before, midnight, just_before, midnight + Duration::from_secs(SECONDS_A_DAY)] {
            assert_eq!(at(since), chrono_at(since));
        }
    }
}
