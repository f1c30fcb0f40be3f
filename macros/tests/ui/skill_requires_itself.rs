use agentry::prelude::*;

/// Math.
#[derive(Skill)]
#[skill(id = "math", vsn = "1.0.0", requires("base", "math"))]
struct Math;

fn main() {}
