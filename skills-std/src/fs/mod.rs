//! `fs`: files in the agent's drive. Every agent has a drive under the runtime's data folder and this skill a
//! folder of its own in it; every path is confined to that folder (see [`path::confine`]). Files written are
//! reported as the outcome's artifacts.

pub mod path;

use agentry::prelude::*;
use cap_std::fs::{Dir, OpenOptions};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::io::{ErrorKind, Read as _, Write};
use std::path::{Path, PathBuf};

pub use path::{MAX_NAME_BYTES, MAX_PATH_BYTES, confine};

/// The most bytes `fs.read` returns unless told otherwise: 10 MiB.
pub const DEFAULT_MAX_READ: u64 = 10 * 1024 * 1024;
/// The most entries `fs.list` returns.
pub const MAX_LIST_ENTRIES: usize = 10_000;

/// Opens the drive folder (creating it the first time) as a capability handle.
fn open_drive(ctx: &ActionContext) -> Result<Dir, ActionError> {
    let drive = ctx.drive()?;
    std::fs::create_dir_all(drive)
        .map_err(|e| ActionError::critical(format!("cannot create the drive folder {}: {e}", drive.display())))?;
    Dir::open_ambient_dir(drive, cap_std::ambient_authority())
        .map_err(|e| ActionError::critical(format!("cannot open the drive folder {}: {e}", drive.display())))
}

/// Runs blocking file work off the async threads, on the drive.
async fn on_drive<T, F>(ctx: &ActionContext, work: F) -> Result<T, ActionError>
where
    T: Send + 'static,
    F: FnOnce(&Dir) -> Result<T, ActionError> + Send + 'static,
{
    let dir = open_drive(ctx)?;
    tokio::task::spawn_blocking(move || work(&dir))
        .await
        .map_err(|e| ActionError::critical(format!("the file task failed: {e}")))?
}

/// Whether the drive can take `bytes` more bytes and `files` more entries within the policy's quota
/// (`limits.drive_bytes`, `limits.drive_files`): the drive is walked without following symlinks (a link counts
/// as one entry), and the walk stops as soon as the quota is passed.
fn within_quota(dir: &Dir, limits: &agentry::policy::Limits, bytes: u64, files: u64) -> Result<(), ActionError> {
    let (mut held_bytes, mut held_files) = (0u64, 0u64);
    let over = |held_bytes: u64, held_files: u64| {
        held_bytes.saturating_add(bytes) > limits.drive_bytes || held_files.saturating_add(files) > limits.drive_files
    };
    let mut folders = vec![PathBuf::new()];
    while let Some(folder) = folders.pop() {
        let listing = dir.read_dir(here(&folder)).map_err(|e| io_error("measure", &folder, e))?;
        for item in listing {
            let item = item.map_err(|e| io_error("measure", &folder, e))?;
            let file_type = item.file_type().map_err(|e| io_error("measure", &folder, e))?;
            held_files += 1;
            if file_type.is_dir() {
                folders.push(folder.join(item.file_name()));
            } else if file_type.is_file() {
                held_bytes = held_bytes.saturating_add(item.metadata().map(|m| m.len()).unwrap_or(0));
            }
            if over(held_bytes, held_files) {
                break;
            }
        }
        if over(held_bytes, held_files) {
            return Err(ActionError::denied(format!(
                "the drive is full for this write: it holds at least {held_bytes} bytes in {held_files} entries, \
                 and {bytes} more bytes in {files} more entries would pass the policy's quota of {} bytes and {} \
                 entries (`limits.drive_bytes`, `limits.drive_files`); delete something first",
                limits.drive_bytes, limits.drive_files
            )));
        }
    }
    Ok(())
}

/// An I/O error as an action error: what was done, to which path, and why.
fn io_error(op: &str, path: &Path, err: std::io::Error) -> ActionError {
    let shown = path::display(path);
    match err.kind() {
        ErrorKind::NotFound => ActionError::validation(format!("cannot {op} `{shown}`: it does not exist")),
        ErrorKind::AlreadyExists => ActionError::validation(format!("cannot {op} `{shown}`: it already exists")),
        ErrorKind::PermissionDenied => ActionError::denied(format!(
            "cannot {op} `{shown}`: not permitted (a symlink leading outside the drive is refused): {err}"
        )),
        ErrorKind::IsADirectory
        | ErrorKind::NotADirectory
        | ErrorKind::DirectoryNotEmpty
        | ErrorKind::InvalidInput
        | ErrorKind::InvalidFilename
        | ErrorKind::InvalidData => ActionError::validation(format!("cannot {op} `{shown}`: {err}")),
        ErrorKind::Interrupted | ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::ResourceBusy => {
            ActionError::transient(format!("cannot {op} `{shown}` right now: {err}"))
        }
        _ => ActionError::critical(format!("cannot {op} `{shown}`: {err}")),
    }
}

/// `.` for the drive itself, else the path.
fn here(path: &Path) -> &Path {
    if path.as_os_str().is_empty() { Path::new(".") } else { path }
}

/// Makes sure the folders above `path` exist. A parent that is a symlink is followed only inside the drive.
fn create_parents(dir: &Dir, path: &Path) -> Result<(), ActionError> {
    let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) else { return Ok(()) };
    match dir.metadata(parent) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(ActionError::validation(format!("`{}` is not a folder", path::display(parent)))),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            dir.create_dir_all(parent).map_err(|e| io_error("create the folders of", path, e))
        }
        Err(e) => Err(io_error("write in", parent, e)),
    }
}

/// What to do when the target of a write or move already exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IfExists {
    /// Refuse with a Validation error.
    #[default]
    Fail,
    /// Replace it.
    Overwrite,
    /// Use the next free name: `name (1).ext`, `name (2).ext`, …
    Rename,
}

/// `name (n).ext` beside `path`.
fn numbered(path: &Path, n: u32) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem} ({n}).{}", ext.to_string_lossy()),
        None => format!("{stem} ({n})"),
    };
    path.with_file_name(name)
}

/// Creates a new file at `path`, or at the first free numbered name when `rename` is set.
fn create_new(dir: &Dir, path: &Path, rename: bool) -> Result<(cap_std::fs::File, PathBuf), ActionError> {
    let mut candidate = path.to_path_buf();
    for n in 1..=1000 {
        match dir.open_with(&candidate, OpenOptions::new().write(true).create_new(true)) {
            Ok(file) => return Ok((file, candidate)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists && rename => candidate = numbered(path, n),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Err(ActionError::validation(format!(
                    "`{}` already exists; expected a new path, or `if_exists` = `overwrite` or `rename`",
                    path::display(path)
                )));
            }
            Err(e) => return Err(io_error("create", path, e)),
        }
    }
    Err(ActionError::validation(format!("no free name beside `{}` after 1000 tries", path::display(path))))
}

/// What a write, append or move left on the drive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Written {
    /// The file's path in the drive (after any rename).
    pub path: String,
    /// The file's size afterwards, in bytes.
    pub bytes: u64,
}

/// Reads a text file from the drive.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "fs.read", output = FileText, idempotent, capabilities(fs), cost = cheap)]
pub struct Read {
    /// The file's path in the drive.
    pub path: String,
    /// Refuse files larger than this many bytes (default 10 MiB; at most the policy's `limits.read_max_bytes`).
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

/// A file's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FileText {
    /// The file's path in the drive.
    pub path: String,
    /// Its content.
    pub content: String,
}

impl Read {
    /// Reads the whole file as UTF-8 text.
    pub async fn run(self, ctx: ActionContext) -> Result<FileText, ActionError> {
        let path = confine(&self.path)?;
        let ceiling = ctx.policy().limits.read_max_bytes;
        let limit = self.max_bytes.unwrap_or(DEFAULT_MAX_READ.min(ceiling));
        if limit > ceiling {
            return Err(ActionError::denied(format!(
                "`max_bytes` is {limit}; the agent's policy allows at most {ceiling} (`limits.read_max_bytes`)"
            )));
        }
        on_drive(&ctx, move |dir| {
            // Only regular files: reading a FIFO, a socket or a device would pin a thread, or never end.
            let regular = |metadata: &cap_std::fs::Metadata| {
                if metadata.is_file() {
                    Ok(())
                } else {
                    Err(ActionError::validation(format!(
                        "`{}` is not a regular file; fs.read reads text files",
                        path::display(&path)
                    )))
                }
            };
            let metadata = dir.metadata(&path).map_err(|e| io_error("read", &path, e))?;
            regular(&metadata)?;
            let too_big = |size: u64| {
                ActionError::validation(format!(
                    "`{}` is {size} bytes or more; expected at most {limit} (raise `max_bytes`)",
                    path::display(&path)
                ))
            };
            if metadata.len() > limit {
                return Err(too_big(metadata.len()));
            }
            let file = dir.open(&path).map_err(|e| io_error("read", &path, e))?;
            regular(&file.metadata().map_err(|e| io_error("read", &path, e))?)?;
            // The size was checked, but a file may grow before it is read: read at most one byte past the limit.
            let bytes =
                read_capped(file, limit).map_err(|e| io_error("read", &path, e))?.ok_or_else(|| too_big(limit + 1))?;
            let content = String::from_utf8(bytes).map_err(|_| {
                ActionError::validation(format!(
                    "`{}` is not UTF-8 text; fs.read reads text files",
                    path::display(&path)
                ))
            })?;
            Ok(FileText { path: path::display(&path), content })
        })
        .await
    }
}

/// Reads everything from `reader` if it holds at most `limit` bytes, else `None`; never reads more than
/// `limit + 1` bytes, however long the source goes on.
fn read_capped(reader: impl std::io::Read, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    reader.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// Writes a text file in the drive, creating its folders.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "fs.write", output = Written, side_effects, capabilities(fs), category = artifact, cost = cheap)]
pub struct WriteFile {
    /// The file's path in the drive.
    pub path: String,
    /// The text to write.
    pub content: String,
    /// What to do if the file exists (default `fail`).
    #[serde(default)]
    pub if_exists: IfExists,
}

impl WriteFile {
    /// Writes the file and reports it as an artifact.
    pub async fn run(self, ctx: ActionContext) -> Result<Written, ActionError> {
        let path = confine(&self.path)?;
        if path.as_os_str().is_empty() {
            return Err(ActionError::validation("`path` is empty; expected a file path inside the drive"));
        }
        let limits = ctx.policy().limits;
        let written = on_drive(&ctx, move |dir| {
            // Counted as a new file with all its folders, which is never less than what it adds.
            let depth = path.components().count() as u64;
            within_quota(dir, &limits, self.content.len() as u64, depth)?;
            create_parents(dir, &path)?;
            let (mut file, path) = match self.if_exists {
                IfExists::Overwrite => {
                    let options = OpenOptions::new().write(true).create(true).truncate(true).clone();
                    (dir.open_with(&path, &options).map_err(|e| io_error("write", &path, e))?, path)
                }
                policy => create_new(dir, &path, policy == IfExists::Rename)?,
            };
            file.write_all(self.content.as_bytes()).map_err(|e| io_error("write", &path, e))?;
            Ok(Written { path: path::display(&path), bytes: self.content.len() as u64 })
        })
        .await?;
        ctx.artifact(&written.path);
        ctx.resource_changed(drive_uri(&written.path));
        Ok(written)
    }
}

/// Appends text to a file in the drive, creating it (and its folders) if needed.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "fs.append", output = Written, side_effects, capabilities(fs), category = artifact, cost = cheap)]
pub struct Append {
    /// The file's path in the drive.
    pub path: String,
    /// The text to add at the end.
    pub content: String,
}

impl Append {
    /// Appends and reports the file as an artifact.
    pub async fn run(self, ctx: ActionContext) -> Result<Written, ActionError> {
        let path = confine(&self.path)?;
        if path.as_os_str().is_empty() {
            return Err(ActionError::validation("`path` is empty; expected a file path inside the drive"));
        }
        let limits = ctx.policy().limits;
        let written = on_drive(&ctx, move |dir| {
            let depth = path.components().count() as u64;
            within_quota(dir, &limits, self.content.len() as u64, depth)?;
            create_parents(dir, &path)?;
            let options = OpenOptions::new().append(true).create(true).clone();
            let mut file = dir.open_with(&path, &options).map_err(|e| io_error("append to", &path, e))?;
            file.write_all(self.content.as_bytes()).map_err(|e| io_error("append to", &path, e))?;
            let bytes = file.metadata().map_err(|e| io_error("append to", &path, e))?.len();
            Ok(Written { path: path::display(&path), bytes })
        })
        .await?;
        ctx.artifact(&written.path);
        ctx.resource_changed(drive_uri(&written.path));
        Ok(written)
    }
}

/// What a drive entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Entry {
    /// Its path in the drive.
    pub path: String,
    /// What it is.
    pub kind: Kind,
    /// Its size in bytes (0 for folders and links).
    pub size: u64,
}

fn kind_of(file_type: cap_std::fs::FileType) -> Kind {
    if file_type.is_symlink() {
        Kind::Symlink
    } else if file_type.is_dir() {
        Kind::Dir
    } else {
        Kind::File
    }
}

/// Lists a folder of the drive.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "fs.list", output = Vec<Entry>, idempotent, capabilities(fs), cost = cheap)]
pub struct List {
    /// The folder's path in the drive (default: the drive itself).
    #[serde(default)]
    pub path: String,
    /// Include everything below it, not only its own entries.
    #[serde(default)]
    pub recursive: bool,
}

impl List {
    /// Lists entries sorted by path (at most 10,000).
    pub async fn run(self, ctx: ActionContext) -> Result<Vec<Entry>, ActionError> {
        let root = confine(&self.path)?;
        on_drive(&ctx, move |dir| {
            let mut entries = Vec::new();
            let mut folders = vec![root];
            while let Some(folder) = folders.pop() {
                let listing = dir.read_dir(here(&folder)).map_err(|e| io_error("list", &folder, e))?;
                for item in listing {
                    let item = item.map_err(|e| io_error("list", &folder, e))?;
                    let path = folder.join(item.file_name());
                    let file_type = item.file_type().map_err(|e| io_error("list", &path, e))?;
                    let kind = kind_of(file_type);
                    let size = if kind == Kind::File { item.metadata().map(|m| m.len()).unwrap_or(0) } else { 0 };
                    if kind == Kind::Dir && self.recursive {
                        folders.push(path.clone());
                    }
                    entries.push(Entry { path: path::display(&path), kind, size });
                    if entries.len() > MAX_LIST_ENTRIES {
                        return Err(ActionError::validation(format!(
                            "more than {MAX_LIST_ENTRIES} entries; list a smaller folder"
                        )));
                    }
                }
            }
            entries.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(entries)
        })
        .await
    }
}

/// Creates a folder in the drive, with any missing parents.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "fs.mkdir", output = Made, side_effects, idempotent, capabilities(fs), cost = cheap)]
pub struct Mkdir {
    /// The folder's path in the drive.
    pub path: String,
}

/// What `fs.mkdir` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Made {
    /// The folder's path in the drive.
    pub path: String,
    /// Whether it was created now (`false`: it existed).
    pub created: bool,
}

impl Mkdir {
    /// Creates the folder; an existing folder is fine.
    pub async fn run(self, ctx: ActionContext) -> Result<Made, ActionError> {
        let path = confine(&self.path)?;
        if path.as_os_str().is_empty() {
            return Err(ActionError::validation("`path` is empty; expected a folder path inside the drive"));
        }
        let limits = ctx.policy().limits;
        on_drive(&ctx, move |dir| {
            let existed = dir.is_dir(&path);
            if !existed {
                within_quota(dir, &limits, 0, path.components().count() as u64)?;
            }
            dir.create_dir_all(&path).map_err(|e| io_error("create", &path, e))?;
            Ok(Made { path: path::display(&path), created: !existed })
        })
        .await
    }
}

/// Moves or renames a file or folder inside the drive.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "fs.move", output = Moved, side_effects, capabilities(fs), cost = cheap)]
pub struct Move {
    /// What to move.
    pub from: String,
    /// Where to.
    pub to: String,
    /// What to do if `to` exists (default `fail`).
    #[serde(default)]
    pub if_exists: IfExists,
}

/// What `fs.move` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Moved {
    /// Where it was.
    pub from: String,
    /// Where it is now (after any rename).
    pub to: String,
}

impl Move {
    /// Moves within the drive.
    pub async fn run(self, ctx: ActionContext) -> Result<Moved, ActionError> {
        let (from, to) = (confine(&self.from)?, confine(&self.to)?);
        if from.as_os_str().is_empty() || to.as_os_str().is_empty() {
            return Err(ActionError::validation("`from` and `to` must name something inside the drive, not the drive"));
        }
        let moved = on_drive(&ctx, move |dir| {
            dir.symlink_metadata(&from).map_err(|e| io_error("move", &from, e))?;
            let mut target = to.clone();
            let mut n = 0;
            while dir.symlink_metadata(&target).is_ok() {
                match self.if_exists {
                    IfExists::Overwrite => break,
                    IfExists::Fail => {
                        return Err(ActionError::validation(format!(
                            "`{}` already exists; expected a new path, or `if_exists` = `overwrite` or `rename`",
                            path::display(&to)
                        )));
                    }
                    IfExists::Rename => {
                        n += 1;
                        if n > 1000 {
                            return Err(ActionError::validation("no free name for the move after 1000 tries"));
                        }
                        target = numbered(&to, n);
                    }
                }
            }
            create_parents(dir, &target)?;
            dir.rename(&from, dir, &target).map_err(|e| io_error("move", &from, e))?;
            Ok(Moved { from: path::display(&from), to: path::display(&target) })
        })
        .await?;
        ctx.resource_changed(drive_uri(&moved.from));
        ctx.resource_changed(drive_uri(&moved.to));
        Ok(moved)
    }
}

/// Deletes a file or folder of the drive.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "fs.delete", output = Deleted, side_effects, idempotent, risk = medium, capabilities(fs), cost = cheap)]
pub struct Delete {
    /// What to delete.
    pub path: String,
    /// Delete a folder with everything in it (otherwise a folder must be empty).
    #[serde(default)]
    pub recursive: bool,
}

/// What `fs.delete` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Deleted {
    /// The path.
    pub path: String,
    /// Whether something was deleted (`false`: nothing was there).
    pub deleted: bool,
}

impl Delete {
    /// Deletes; a missing path is not an error.
    pub async fn run(self, ctx: ActionContext) -> Result<Deleted, ActionError> {
        let path = confine(&self.path)?;
        if path.as_os_str().is_empty() {
            return Err(ActionError::denied("refusing to delete the drive itself; expected a path inside it"));
        }
        let deleted = on_drive(&ctx, move |dir| {
            let meta = match dir.symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    return Ok(Deleted { path: path::display(&path), deleted: false });
                }
                Err(e) => return Err(io_error("delete", &path, e)),
            };
            let result = if !meta.is_dir() {
                dir.remove_file(&path)
            } else if self.recursive {
                dir.remove_dir_all(&path)
            } else {
                dir.remove_dir(&path)
            };
            result.map_err(|e| io_error("delete", &path, e))?;
            Ok(Deleted { path: path::display(&path), deleted: true })
        })
        .await?;
        if deleted.deleted {
            ctx.resource_changed(drive_uri(&deleted.path));
        }
        Ok(deleted)
    }
}

/// Describes a path of the drive.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "fs.stat", output = Stat, idempotent, capabilities(fs), cost = cheap)]
pub struct StatPath {
    /// The path in the drive.
    pub path: String,
}

/// What `fs.stat` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Stat {
    /// The path.
    pub path: String,
    /// Whether anything is there.
    pub exists: bool,
    /// What it is, if it exists.
    pub kind: Option<Kind>,
    /// Its size in bytes (0 for folders and links).
    pub size: u64,
    /// When it last changed.
    pub modified: Option<chrono::DateTime<chrono::Utc>>,
}

impl StatPath {
    /// Looks without following a final symlink.
    pub async fn run(self, ctx: ActionContext) -> Result<Stat, ActionError> {
        let path = confine(&self.path)?;
        on_drive(&ctx, move |dir| {
            let shown = path::display(&path);
            match dir.symlink_metadata(here(&path)) {
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    Ok(Stat { path: shown, exists: false, kind: None, size: 0, modified: None })
                }
                Err(e) => Err(io_error("look at", &path, e)),
                Ok(meta) => Ok(Stat {
                    path: shown,
                    exists: true,
                    kind: Some(kind_of(meta.file_type())),
                    size: if meta.is_file() { meta.len() } else { 0 },
                    modified: meta.modified().ok().map(|t| t.into_std().into()),
                }),
            }
        })
        .await
    }
}

/// The folders `fs.make_home_dir` creates under `home/<user>/`.
pub const HOME_FOLDERS: [&str; 4] = ["documents", "downloads", "notes", "projects"];

/// Creates a user's standard folders (`home/<user>/documents`, `downloads`, `notes`, `projects`) by calling
/// `fs.mkdir` for each through the action context, so each passes the agent's gate.
#[derive(Debug, Deserialize, Serialize, JsonSchema, Action)]
#[action(id = "fs.make_home_dir", output = Vec<Made>, side_effects, idempotent, capabilities(fs), cost = cheap)]
pub struct MakeHomeDir {
    /// The user's name: letters, digits, `_`, `-` and `.`, not starting with a dot.
    pub user: String,
}

impl MakeHomeDir {
    /// One nested `fs.mkdir` per folder; the frame's state records how far it got.
    pub async fn run(self, mut ctx: ActionContext) -> Result<Vec<Made>, ActionError> {
        let valid = !self.user.is_empty()
            && self.user.len() <= MAX_NAME_BYTES
            && !self.user.starts_with('.')
            && self.user.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            return Err(ActionError::validation(format!(
                "user {:?} is not a plain name; expected letters, digits, `_`, `-` or `.`, not starting with `.`",
                self.user
            )));
        }
        let mut made = Vec::new();
        for folder in HOME_FOLDERS {
            let output = ctx.call_typed(Mkdir { path: format!("home/{}/{folder}", self.user) }).await?;
            made.push(output);
            ctx.frame_mut().state = serde_json::json!({"done": made.len(), "of": HOME_FOLDERS.len()});
        }
        Ok(made)
    }
}

/// Files in the agent's drive: read, write, append, list, mkdir, move, delete, stat, and `make_home_dir`.
#[derive(Skill)]
#[skill(
    id = "fs",
    name = "Files",
    version = "1.0.0",
    category = "storage",
    tags("files", "drive"),
    actions(Read, WriteFile, Append, List, Mkdir, Move, Delete, StatPath, MakeHomeDir),
    instructions = "Paths are relative to your drive, with `/` between folders; `..` and absolute paths are \
                    refused. fs.write fails if the file exists unless you pass if_exists = overwrite or rename.",
    offers = drive_resource
)]
pub struct Files;

/// The URI of a file in the drive, as the skill's resource names it (`drive:///notes/a%20b.md` for `notes/a
/// b.md`): each segment percent-encoded, so the URI is valid and decodes back to exactly that path.
pub fn drive_uri(path: &str) -> String {
    const SEGMENT: &percent_encoding::AsciiSet =
        &percent_encoding::CONTROLS.add(b' ').add(b'%').add(b'?').add(b'#').add(b'"').add(b'<').add(b'>').add(b'`');
    let encoded: Vec<String> =
        path.split('/').map(|segment| percent_encoding::utf8_percent_encode(segment, SEGMENT).to_string()).collect();
    format!("{DRIVE_SCHEME}{}", encoded.join("/"))
}

const DRIVE_SCHEME: &str = "drive:///";

/// The drive as a resource template, `drive:///{+path}`, read by `fs.read`: reading a file is exactly as
/// confined, allowed and journaled as `fs.read` is. Writes through `fs.*` announce the files they change.
fn drive_resource(skill: agentry::skill::SkillBuilder) -> agentry::skill::SkillBuilder {
    let resource = agentry::skill::Resource::new(format!("{DRIVE_SCHEME}{{+path}}"), "drive", "fs.read").map(|r| {
        r.description("A text file in the agent's drive, by its path in the drive.")
            .mime_type("text/plain")
            .text_at("/content")
    });
    skill.resource(resource)
}

#[cfg(test)]
mod tests {
    use super::read_capped;

    #[test]
    fn reading_is_capped_however_long_the_source_goes_on() {
        // An endless source (a file that keeps growing, a device) ends one byte past the limit.
        assert_eq!(read_capped(std::io::repeat(b'x'), 1000).unwrap(), None);
        assert_eq!(read_capped(&b"hello"[..], 5).unwrap(), Some(b"hello".to_vec()));
        assert_eq!(read_capped(&b"hello!"[..], 5).unwrap(), None);
    }
}
