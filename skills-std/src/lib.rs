//! The standard library of agentry skills. Each skill is a module of its own; they arrive with the standard
//! skills issue.
