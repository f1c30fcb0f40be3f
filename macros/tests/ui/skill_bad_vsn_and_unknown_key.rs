use agentry::prelude::*;

/// Math.
#[derive(Skill)]
#[skill(id = "math", version = "one")]
struct Math;

/// Logic.
#[derive(Skill)]
#[skill(id = "logic", vsn = "1.0.0")]
struct Logic;

fn main() {}
