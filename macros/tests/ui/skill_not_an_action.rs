use agentry::prelude::*;

struct NotAnAction;

/// Math.
#[derive(Skill)]
#[skill(id = "math", vsn = "1.0.0", actions(NotAnAction))]
struct Math;

fn main() {}
