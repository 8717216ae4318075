//! Durations on the command line: `--timeout 2.5`, `--session-idle-timeout 30m`.
//!
//! A duration is a number of seconds (`90`, `2.5`) or a number with a unit: `ms`, `s`, `m` or
//! `h` (`500ms`, `90s`, `30m`, `1.5h`). It must be more than zero and at most [`MAX`]; anything
//! else (`-1`, `0`, `NaN`, `inf`, `1e30`) is a usage error that says why, never a panic.

use std::fmt;
use std::time::Duration;

/// The longest duration a flag takes: 365 days. Longer ones are surely mistakes, and a deadline
/// that far out could overflow the clock it is added to.
pub(crate) const MAX: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// What the units are called, and how many seconds each is.
const UNITS: [(&str, f64); 4] = [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)];

/// A duration given on the command line; it prints the way it is written (`30m`, `1.5s`), so it
/// can be a flag's default shown in `--help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span(pub(crate) Duration);

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self(duration) = *self;
        let whole = duration.subsec_nanos() == 0;
        let seconds = duration.as_secs();
        if whole && seconds > 0 && seconds % 3600 == 0 {
            write!(f, "{}h", seconds / 3600)
        } else if whole && seconds > 0 && seconds % 60 == 0 {
            write!(f, "{}m", seconds / 60)
        } else if whole {
            write!(f, "{seconds}s")
        } else if duration.subsec_nanos() % 1_000_000 == 0 {
            write!(f, "{}ms", duration.as_millis())
        } else {
            write!(f, "{}s", duration.as_secs_f64())
        }
    }
}

/// Parses a duration flag (a clap value parser).
/// As [`parse`], with zero allowed (`0s`: a cache that keeps nothing, say).
pub(crate) fn parse_or_zero(text: &str) -> Result<Span, String> {
    let trimmed = text.trim();
    let number = UNITS
        .iter()
        .find_map(|&(unit, _)| trimmed.strip_suffix(unit))
        .unwrap_or(trimmed);
    if number.trim().parse::<f64>() == Ok(0.0) {
        return Ok(Span(Duration::ZERO));
    }
    parse(text)
}

pub(crate) fn parse(text: &str) -> Result<Span, String> {
    let trimmed = text.trim();
    let (number, scale) = UNITS
        .iter()
        // `ms` is tried before `s`, which it ends with.
        .find_map(|&(unit, scale)| Some((trimmed.strip_suffix(unit)?, scale)))
        .unwrap_or((trimmed, 1.0));
    let usage = || {
        format!(
            "`{text}` is not a duration: give a number of seconds (2.5) or a number with a unit \
             (500ms, 90s, 30m, 2h)"
        )
    };
    let value: f64 = number.trim().parse().map_err(|_| usage())?;
    if !value.is_finite() {
        return Err(usage());
    }
    if value <= 0.0 {
        return Err(format!("`{text}`: give a duration of more than zero"));
    }
    let too_long = || {
        format!(
            "`{text}` is too long: at most {} days",
            MAX.as_secs() / 86_400
        )
    };
    let duration = Duration::try_from_secs_f64(value * scale).map_err(|_| too_long())?;
    if duration > MAX {
        return Err(too_long());
    }
    if duration.is_zero() {
        return Err(format!(
            "`{text}` is shorter than a nanosecond: give a duration of more than zero"
        ));
    }
    Ok(Span(duration))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_units_are_read() {
        let cases = [
            ("2.5", Duration::from_millis(2500)),
            ("90", Duration::from_secs(90)),
            ("500ms", Duration::from_millis(500)),
            ("90s", Duration::from_secs(90)),
            ("30m", Duration::from_secs(1800)),
            ("1.5h", Duration::from_secs(5400)),
            (" 2 m ", Duration::from_secs(120)),
        ];
        for (text, wanted) in cases {
            assert_eq!(parse(text), Ok(Span(wanted)), "{text}");
        }
    }

    #[test]
    fn absurd_durations_are_refused_with_a_reason() {
        for (text, reason) in [
            ("1e30", "too long"),
            ("1e30ms", "too long"),
            ("366d", "not a duration"),
            ("8761h", "too long"),
            ("-1", "more than zero"),
            ("0", "more than zero"),
            ("-0", "more than zero"),
            ("1e-12", "shorter than a nanosecond"),
            ("NaN", "not a duration"),
            ("inf", "not a duration"),
            ("-inf", "not a duration"),
            ("", "not a duration"),
            ("ten", "not a duration"),
            ("5 minutes", "not a duration"),
        ] {
            match parse(text) {
                Ok(span) => panic!("{text:?} was taken as {span}"),
                Err(message) => assert!(message.contains(reason), "{text:?}: {message}"),
            }
        }
        assert_eq!(parse("8760h"), Ok(Span(MAX)));
    }

    #[test]
    fn spans_print_as_they_are_written_and_read_back() {
        for (duration, text) in [
            (Duration::from_secs(1800), "30m"),
            (Duration::from_secs(7200), "2h"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_micros(1500), "0.0015s"),
        ] {
            assert_eq!(Span(duration).to_string(), text);
            assert_eq!(parse(text), Ok(Span(duration)), "{text}");
        }
    }
}
