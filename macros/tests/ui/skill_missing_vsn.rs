use agentry::prelude::*;

/// Math.
#[derive(Skill)]
#[skill(id = "math")]
struct Math;

fn main() {}
