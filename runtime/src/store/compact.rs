//! Writing and reading the journal's compact forms (`run_codec.rs`, `signal_codec.rs`): fixed-width
//! little-endian integers, 16-byte ids, texts as a 4-byte length and their bytes, optional values as a byte 0, or
//! 1 and the value. Reading never panics and never trusts a length: bytes that end early or say something
//! impossible are a [`StoreError::Decode`] naming what was being read.

use super::StoreError;
use uuid::Uuid;

/// Appends `bytes` as a text: its length in 4 bytes, then the bytes.
pub(super) fn put_text(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Appends `value` as an optional value: 0, or 1 and what `write` appends.
pub(super) fn put_optional<T>(out: &mut Vec<u8>, value: Option<T>, write: impl FnOnce(&mut Vec<u8>, T)) {
    match value {
        Some(value) => {
            out.push(1);
            write(out, value);
        }
        None => out.push(0),
    }
}

/// What is left of a compact value to read.
pub(super) struct Reader<'a> {
    rest: &'a [u8],
    /// What is read (a decode error's `what`), and the form expected (the end of its message).
    what: &'static str,
    expected: &'static str,
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8], what: &'static str, expected: &'static str) -> Self {
        Self { rest: bytes, what, expected }
    }

    /// The error for damaged bytes: `message` says what was wrong.
    pub(super) fn damaged(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Decode { what: self.what, message: format!("{message}; expected {}", self.expected) }
    }

    pub(super) fn bytes<const N: usize>(&mut self, field: &str) -> Result<[u8; N], StoreError> {
        let Some((bytes, rest)) = self.rest.split_first_chunk::<N>() else {
            return Err(self.damaged(format!("it ends in its {field}")));
        };
        self.rest = rest;
        Ok(*bytes)
    }

    pub(super) fn byte(&mut self, field: &str) -> Result<u8, StoreError> {
        Ok(self.bytes::<1>(field)?[0])
    }

    pub(super) fn u32(&mut self, field: &str) -> Result<u32, StoreError> {
        Ok(u32::from_le_bytes(self.bytes(field)?))
    }

    pub(super) fn u64(&mut self, field: &str) -> Result<u64, StoreError> {
        Ok(u64::from_le_bytes(self.bytes(field)?))
    }

    pub(super) fn uuid(&mut self, field: &str) -> Result<Uuid, StoreError> {
        Ok(Uuid::from_bytes(self.bytes(field)?))
    }

    /// A text, as UTF-8.
    pub(super) fn text(&mut self, field: &str) -> Result<&'a str, StoreError> {
        let len = self.u32(field)? as usize;
        let Some(bytes) = self.rest.get(..len) else {
            return Err(self.damaged(format!("it ends in its {field}")));
        };
        self.rest = &self.rest[len..];
        std::str::from_utf8(bytes).map_err(|e| self.damaged(format!("its {field}: {e}")))
    }

    /// An optional value, read by `value` when present.
    pub(super) fn optional<T>(
        &mut self,
        field: &str,
        value: impl FnOnce(&mut Self) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        match self.byte(field)? {
            0 => Ok(None),
            1 => value(self).map(Some),
            other => Err(self.damaged(format!("its {field} is marked {other}, neither 0 nor 1"))),
        }
    }

    /// A count of items that take at least `each` bytes: one larger than the bytes left could hold is damage,
    /// not a reason to allocate.
    pub(super) fn count(&mut self, field: &str, each: usize) -> Result<usize, StoreError> {
        let count = self.u32(field)? as usize;
        if count > self.rest.len() / each.max(1) {
            return Err(self.damaged(format!("it says {count} {field} in {} bytes", self.rest.len())));
        }
        Ok(count)
    }

    /// Checks that nothing is left.
    pub(super) fn end(self) -> Result<(), StoreError> {
        match self.rest.len() {
            0 => Ok(()),
            left => Err(self.damaged(format!("{left} bytes follow its end"))),
        }
    }
}
