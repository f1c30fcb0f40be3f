//! Agents the examples share. Each is written the way a user writes theirs.

pub mod calculator;
pub mod librarian;
