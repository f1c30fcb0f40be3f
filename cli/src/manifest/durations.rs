//! Durations as people write them in a manifest (`30s`, `10m`, `1h 30m`, `500ms`), read with `humantime`.

use std::time::Duration;
use toml::Spanned;

/// A byte range in a manifest file.
pub type Span = std::ops::Range<usize>;

/// Reads a duration written as text; `Err` says what was wrong and what was expected, with where.
pub fn parse(text: &Spanned<String>) -> Result<Duration, (Span, String)> {
    humantime::parse_duration(text.get_ref().trim()).map_err(|err| {
        (
            text.span(),
            format!(
                "`{}` is not a duration ({err}); expected a number with a unit: `500ms`, `30s`, `10m`, `1h 30m`",
                text.get_ref()
            ),
        )
    })
}
