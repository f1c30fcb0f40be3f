//! What a page defined in its earlier blocks, for its later blocks to use through one hidden line
//! (`# use agentry_guide::setup::concepts::*;`). Each item here is written as the page shows it.

pub mod concepts;
pub mod simulation;
pub mod testing;
