use agentry::prelude::*;

struct NotAnAction;

/// Math.
#[derive(Skill)]
#[skill(id = "math", version = "1.0.0", actions(NotAnAction))]
struct Math;

fn main() {}
