//! Instants written as RFC 3339 text, exactly as chrono's serde writes them, but in one piece.
//!
//! chrono hands a `DateTime` to a serializer through `collect_str`, a character at a time, and serde_json
//! escapes each piece it is given on its own: writing the four instants of a run's record and outcome signal
//! that way was a tenth of a durable run's cost on the agent's thread. Here the text is made in a buffer on the
//! stack and given to the serializer as one string. Instants chrono writes in another shape (a year outside
//! 0..=9999, a leap second) are left to chrono.

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::{Serialize, Serializer};

/// The longest text made here: `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`.
const LONGEST: usize = 30;

/// Serializes `at` as chrono does (for `#[serde(serialize_with)]`).
pub(crate) fn serialize<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    Stamp(at).serialize(serializer)
}

/// Serializes a list of values with the instant of each, as serde serializes a `Vec<(T, DateTime<Utc>)>`.
pub(crate) fn serialize_stamped<S: Serializer, T: Serialize>(
    stamped: &[(T, DateTime<Utc>)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(stamped.iter().map(|(value, at)| (value, Stamp(at))))
}

/// An instant that serializes as one string.
struct Stamp<'a>(&'a DateTime<Utc>);

impl Serialize for Stamp<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut text = [0u8; LONGEST];
        // Only ASCII digits and separators are written, so the text always reads as UTF-8.
        match write(self.0, &mut text).and_then(|len| std::str::from_utf8(&text[..len]).ok()) {
            Some(text) => serializer.serialize_str(text),
            None => self.0.serialize(serializer),
        }
    }
}

/// Writes `at` into `text` as chrono's RFC 3339 with `SecondsFormat::AutoSi` and `Z`, returning its length; or
/// `None` for an instant chrono writes in another shape.
fn write(at: &DateTime<Utc>, text: &mut [u8; LONGEST]) -> Option<usize> {
    // The date and time are read once from the UTC value: each of `DateTime`'s own accessors works out the
    // local time again, which was a third of the cost here.
    let naive = at.naive_utc();
    let (date, time) = (naive.date(), naive.time());
    let year = u32::try_from(date.year()).ok().filter(|year| *year <= 9999)?;
    let nanos = time.nanosecond();
    // A leap second: chrono writes it as second 60.
    if nanos >= 1_000_000_000 {
        return None;
    }
    let seconds = time.num_seconds_from_midnight();
    two_digits(&mut text[0..2], year / 100);
    two_digits(&mut text[2..4], year % 100);
    text[4] = b'-';
    two_digits(&mut text[5..7], date.month());
    text[7] = b'-';
    two_digits(&mut text[8..10], date.day());
    text[10] = b'T';
    two_digits(&mut text[11..13], seconds / 3600);
    text[13] = b':';
    two_digits(&mut text[14..16], seconds / 60 % 60);
    text[16] = b':';
    two_digits(&mut text[17..19], seconds % 60);
    // As many fraction digits as it takes: none, milliseconds, microseconds or nanoseconds.
    let (mut fraction, digits) = match nanos {
        0 => (0, 0),
        n if n % 1_000_000 == 0 => (n / 1_000_000, 3),
        n if n % 1_000 == 0 => (n / 1_000, 6),
        n => (n, 9),
    };
    let mut len = 19;
    if digits > 0 {
        text[len] = b'.';
        for place in text[len + 1..=len + digits].iter_mut().rev() {
            *place = digit(fraction % 10);
            fraction /= 10;
        }
        len += 1 + digits;
    }
    text[len] = b'Z';
    Some(len + 1)
}

/// Writes `value` (below 100) as two decimal digits.
fn two_digits(text: &mut [u8], value: u32) {
    text[0] = digit(value / 10 % 10);
    text[1] = digit(value % 10);
}

/// The ASCII digit for `value` (below 10).
fn digit(value: u32) -> u8 {
    // Below ten, so it fits in a byte.
    b'0' + (value % 10) as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Serialize)]
    struct Mine<'a> {
        #[serde(serialize_with = "serialize")]
        at: &'a DateTime<Utc>,
        #[serde(serialize_with = "serialize_stamped")]
        history: &'a [(u8, DateTime<Utc>)],
    }

    #[derive(Serialize)]
    struct Chronos<'a> {
        at: &'a DateTime<Utc>,
        history: &'a [(u8, DateTime<Utc>)],
    }

    fn instant(seconds: i64, nanos: u32) -> DateTime<Utc> {
        DateTime::from_timestamp(seconds, nanos).unwrap()
    }

    /// Nanoseconds of each shape: none, whole milliseconds, whole microseconds, any, and a leap second's.
    fn nanos() -> impl Strategy<Value = u32> {
        prop_oneof![
            Just(0u32),
            (0u32..1_000).prop_map(|ms| ms * 1_000_000),
            (0u32..1_000_000).prop_map(|us| us * 1_000),
            0u32..1_000_000_000,
            1_000_000_000u32..2_000_000_000,
        ]
    }

    proptest! {
        /// Any instant chrono can hold, from before year 0 to past 9999, writes as chrono writes it.
        #[test]
        fn an_instant_is_written_as_chrono_writes_it(
            seconds in -70_000_000_000i64..300_000_000_000,
            nanos in nanos(),
            history in proptest::collection::vec((any::<u8>(), 0i64..4_000_000_000, 0u32..1_000_000_000), 0..4),
        ) {
            // A leap second's nanoseconds are only held at the last second of a minute.
            let seconds = if nanos >= 1_000_000_000 { seconds - seconds.rem_euclid(60) + 59 } else { seconds };
            let at = instant(seconds, nanos);
            let history: Vec<(u8, DateTime<Utc>)> =
                history.into_iter().map(|(n, s, ns)| (n, instant(s, ns))).collect();
            let mine = serde_json::to_string(&Mine { at: &at, history: &history }).unwrap();
            let chronos = serde_json::to_string(&Chronos { at: &at, history: &history }).unwrap();
            prop_assert_eq!(mine, chronos);
        }
    }

    #[test]
    fn the_shapes_are_those_chrono_writes() {
        let cases = [
            (instant(0, 0), "1970-01-01T00:00:00Z"),
            (instant(1_795_000_000, 5_000_000), "2026-11-18T11:06:40.005Z"),
            (instant(1_795_000_000, 5_000), "2026-11-18T11:06:40.000005Z"),
            (instant(1_795_000_000, 5), "2026-11-18T11:06:40.000000005Z"),
            (instant(253_402_300_799, 999_999_999), "9999-12-31T23:59:59.999999999Z"),
        ];
        for (at, text) in cases {
            assert_eq!(serde_json::to_value(Mine { at: &at, history: &[] }).unwrap()["at"], text);
        }
    }
}
