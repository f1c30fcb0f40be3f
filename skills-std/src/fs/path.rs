//! Paths inside a drive: checked by their text before anything touches the disk, then opened through a
//! capability handle on the drive folder, so the operating system refuses whatever still leads outside (a
//! symlink pointing out, say).

use agentry::ActionError;
use std::path::{Path, PathBuf};

/// The longest path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// The longest name of one file or folder accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// Checks a path given to an fs action and returns it relative to the drive (empty for the drive itself).
/// Refuses, with `Denied`, absolute paths and `..`; with `Validation`, NUL bytes, backslashes and names or
/// paths that are too long.
pub fn confine(path: &str) -> Result<PathBuf, ActionError> {
    if path.contains('\0') {
        return Err(ActionError::validation(format!("path {path:?} contains a NUL byte; expected plain text")));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(ActionError::validation(format!(
            "the path is {} bytes long; expected at most {MAX_PATH_BYTES}",
            path.len()
        )));
    }
    if path.contains('\\') {
        return Err(ActionError::validation(format!(
            "path {path:?} contains a backslash; expected `/` between folders"
        )));
    }
    if path.starts_with('/') || Path::new(path).has_root() || looks_like_drive_letter(path) {
        return Err(ActionError::denied(format!(
            "path {path:?} is absolute; expected a path relative to the agent's drive"
        )));
    }
    let mut inside = PathBuf::new();
    for name in path.split('/') {
        match name {
            "" | "." => {}
            ".." => {
                return Err(ActionError::denied(format!(
                    "path {path:?} uses `..`, which could leave the agent's drive; expected a path inside it"
                )));
            }
            name if name.len() > MAX_NAME_BYTES => {
                return Err(ActionError::validation(format!(
                    "a name in path {path:?} is {} bytes long; expected at most {MAX_NAME_BYTES}",
                    name.len()
                )));
            }
            name => inside.push(name),
        }
    }
    Ok(inside)
}

/// `C:` or `C:/…`: a Windows drive, refused on every system so a path means the same everywhere. (`a:b.txt`
/// is an ordinary name.)
fn looks_like_drive_letter(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && bytes.get(2).is_none_or(|b| *b == b'/')
}

/// A path relative to the drive as the text actions report (`/` between names; `""` is the drive itself).
pub fn display(path: &Path) -> String {
    path.iter().map(|name| name.to_string_lossy()).collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry::action::ErrorClass;

    #[test]
    fn plain_paths_are_kept_and_normalized() {
        assert_eq!(confine("notes/today.txt").unwrap(), PathBuf::from("notes/today.txt"));
        assert_eq!(confine("./a//b/./c").unwrap(), PathBuf::from("a/b/c"));
        assert_eq!(confine("").unwrap(), PathBuf::new());
        assert_eq!(display(&confine("a/b").unwrap()), "a/b");
        assert_eq!(confine("a:b.txt").unwrap(), PathBuf::from("a:b.txt"), "a colon in a name is fine");
    }

    #[test]
    fn escapes_and_bad_names_are_refused_with_their_class() {
        let cases = [
            ("../secret", ErrorClass::Denied),
            ("a/../../b", ErrorClass::Denied),
            ("a/..", ErrorClass::Denied),
            ("/etc/passwd", ErrorClass::Denied),
            ("C:/Windows", ErrorClass::Denied),
            ("C:", ErrorClass::Denied),
            ("../drive_evil/x", ErrorClass::Denied),
            ("a\0b", ErrorClass::Validation),
            ("a\\..\\b", ErrorClass::Validation),
        ];
        for (path, class) in cases {
            assert_eq!(confine(path).unwrap_err().class(), class, "{path:?}");
        }
        let long_name = "x".repeat(MAX_NAME_BYTES + 1);
        assert_eq!(confine(&long_name).unwrap_err().class(), ErrorClass::Validation);
        let long_path = "a/".repeat(MAX_PATH_BYTES);
        assert_eq!(confine(&long_path).unwrap_err().class(), ErrorClass::Validation);
    }
}
