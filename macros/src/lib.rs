//! Derive macros for agentry. The derives themselves arrive with the macros issue; this crate exists so the
//! workspace layout is in place from the start.
