use agentry::prelude::*;

/// Math.
#[derive(Skill)]
#[skill(id = "math", version = "1.0.0", requires("base", "math"))]
struct Math;

fn main() {}
