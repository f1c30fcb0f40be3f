use agentry::prelude::*;

/// Math.
#[derive(Skill)]
#[skill(id = "math", vsn = "one")]
struct Math;

/// Logic.
#[derive(Skill)]
#[skill(id = "logic", version = "1.0.0")]
struct Logic;

fn main() {}
