//! Strategies shared by the property tests.
