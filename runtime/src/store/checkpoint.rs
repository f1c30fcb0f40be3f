//! Copying the SQLite journal's write-ahead log back into its database file (a checkpoint) on a thread of its
//! own, so the writer never waits for it.
//!
//! A checkpoint presses the log to the disk, copies its pages into the database file and presses that too: with
//! a busy journal that is tens of milliseconds of waiting for the disk, during which a writer that checkpointed
//! itself (SQLite's automatic checkpoint) committed nothing and the agents, their queue to it full, waited too.
//! Here the writer only counts the log's pages after each commit (SQLite's log hook) and, past
//! [`CHECKPOINT_PAGES`], wakes the checkpointer, which checkpoints on a connection of its own while the writer
//! goes on appending. SQLite starts the log over from its beginning at the writer's first commit after a
//! checkpoint that copied all of it. Should checkpoints fall behind that far, past [`WRITER_CHECKPOINTS_AT`]
//! pages the writer checkpoints itself, as SQLite would have, so the log stays bounded.

use rusqlite::Connection;
use std::cell::Cell;
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// The log's size, in bytes, at which the checkpointer is woken.
const CHECKPOINT_BYTES: i64 = 32 * 1024 * 1024;
/// The log's size, in bytes, at which the writer checkpoints itself.
const WRITER_CHECKPOINTS_AT_BYTES: i64 = 4 * CHECKPOINT_BYTES;

thread_local! {
    /// The pages in the log after the last commit of the connection that committed on this thread (each
    /// journal's writer has a thread of its own). Set by [`count_pages`].
    static LOG_PAGES: Cell<i64> = const { Cell::new(0) };
}

/// SQLite's log hook: notes how many pages the log holds after a commit.
fn count_pages(_: &rusqlite::hooks::Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
    LOG_PAGES.set(i64::from(pages));
    Ok(())
}

/// The log's sizes, in pages, that wake the checkpointer and that make the writer checkpoint itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogSizes {
    pub checkpoint: i64,
    pub writer_checkpoints: i64,
}

/// The checkpointer of one journal, held by its writer. Dropping it lets the thread end and waits for it.
pub(crate) struct Checkpointer {
    wake: Option<mpsc::SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
    sizes: LogSizes,
}

impl Checkpointer {
    /// Starts the checkpointer of the journal at `path`, whose writer's connection is `writer` (on the calling
    /// thread): SQLite's automatic checkpoints stop, and the writer's commits are counted instead. `synchronous`
    /// is the writer's level, which a checkpoint keeps. Without a thread or a connection of its own (an error
    /// in the log), the writer checkpoints itself, as often as the checkpointer would have.
    pub(crate) fn start(writer: &Connection, path: &Path, synchronous: &str) -> Self {
        let page_size: i64 = writer.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap_or(4096).max(512);
        let sizes = LogSizes {
            checkpoint: CHECKPOINT_BYTES / page_size,
            writer_checkpoints: WRITER_CHECKPOINTS_AT_BYTES / page_size,
        };
        Self::start_with(writer, path, synchronous, sizes)
    }

    /// [`Checkpointer::start`] with the log's sizes given.
    pub(crate) fn start_with(writer: &Connection, path: &Path, synchronous: &str, sizes: LogSizes) -> Self {
        let mut checkpointer = Self::writer_only(writer, sizes);
        let connection = Connection::open(path).and_then(|db| {
            db.pragma_update(None, "synchronous", synchronous)?;
            // The writer may hold the file for a moment while it starts the log over.
            db.busy_timeout(std::time::Duration::from_secs(10))?;
            Ok(db)
        });
        let db = match connection {
            Ok(db) => db,
            Err(err) => {
                tracing::error!(%err, "the journal's checkpointer could not open the file; the writer checkpoints");
                // As often as the checkpointer would have.
                checkpointer.sizes.writer_checkpoints = sizes.checkpoint;
                return checkpointer;
            }
        };
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        let spawned = std::thread::Builder::new().name("agentry-checkpoint".to_owned()).spawn(move || {
            while woken.recv().is_ok() {
                checkpoint(&db, "PASSIVE");
            }
        });
        match spawned {
            Ok(thread) => {
                checkpointer.wake = Some(wake);
                checkpointer.thread = Some(thread);
            }
            Err(err) => {
                tracing::error!(%err, "the journal's checkpointer thread could not start; the writer checkpoints");
                checkpointer.sizes.writer_checkpoints = sizes.checkpoint;
            }
        }
        checkpointer
    }

    /// Counts the log's pages after each commit of `writer`, with no thread to checkpoint: the writer
    /// checkpoints itself once the log holds `sizes.writer_checkpoints` pages.
    fn writer_only(writer: &Connection, sizes: LogSizes) -> Self {
        writer.wal_hook(Some(count_pages));
        Self { wake: None, thread: None, sizes }
    }

    /// Called by the writer after each commit on `writer`: wakes the checkpointer once the log is big enough,
    /// or checkpoints on the writer's own connection once it is far too big.
    pub(crate) fn committed(&self, writer: &Connection) {
        let pages = LOG_PAGES.get();
        if pages >= self.sizes.writer_checkpoints {
            // RESTART waits for a checkpoint going on and for readers of the log, so the next commit starts the
            // log over.
            checkpoint(writer, "RESTART");
            LOG_PAGES.set(0);
        } else if pages >= self.sizes.checkpoint
            && let Some(wake) = &self.wake
        {
            // Full means the checkpointer is already woken: it looks at the log once more after this commit.
            let _ = wake.try_send(());
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.wake = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs a checkpoint of `mode` on `db`. A failed one is logged and left for the next: the log keeps every
/// commit until a checkpoint copies it.
fn checkpoint(db: &Connection, mode: &str) {
    let ran = db.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| r.get::<_, i64>(0));
    if let Err(err) = ran {
        tracing::warn!(%err, mode, "a checkpoint of the journal's log failed; the next one tries again");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal-like file in WAL mode with 4 KiB pages and one table, and its writer's connection.
    fn writer(folder: &Path) -> (Connection, std::path::PathBuf) {
        let path = folder.join("log.db");
        let db = Connection::open(&path).unwrap();
        db.pragma_update(None, "page_size", 4096).unwrap();
        db.pragma_update(None, "journal_mode", "WAL").unwrap();
        db.execute_batch("CREATE TABLE rows (body BLOB NOT NULL)").unwrap();
        (db, path)
    }

    /// Commits `commits` rows of 8 KiB each (a few pages per commit), telling `checkpointer` after each.
    fn write(db: &Connection, checkpointer: &Checkpointer, commits: usize) {
        for _ in 0..commits {
            db.execute("INSERT INTO rows (body) VALUES (zeroblob(8192))", []).unwrap();
            checkpointer.committed(db);
        }
    }

    fn length(path: &Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    fn log(path: &Path) -> std::path::PathBuf {
        let mut log = path.as_os_str().to_owned();
        log.push("-wal");
        log.into()
    }

    #[test]
    fn the_checkpointer_copies_the_log_into_the_file_on_its_own_connection_once_the_log_is_big_enough() {
        let folder = tempfile::tempdir().unwrap();
        let (db, path) = writer(folder.path());
        let sizes = LogSizes { checkpoint: 32, writer_checkpoints: 10_000 };
        let checkpointer = Checkpointer::start_with(&db, &path, "NORMAL", sizes);
        let empty = length(&path);
        // Below the size that wakes it, nothing is copied.
        write(&db, &checkpointer, 5);
        assert_eq!(length(&path), empty, "the log is not copied before it is big enough");
        write(&db, &checkpointer, 40);
        // Dropping it waits for the checkpoint it was woken for.
        drop(checkpointer);
        assert!(
            length(&path) >= 32 * 4096,
            "the log's pages are in the file ({} bytes), copied by the checkpointer, not the writer",
            length(&path)
        );
        let rows: i64 = db.query_row("SELECT count(*) FROM rows", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 45);
    }

    #[test]
    fn without_a_checkpointer_the_writer_checkpoints_itself_and_the_log_stays_bounded() {
        let folder = tempfile::tempdir().unwrap();
        let (db, path) = writer(folder.path());
        let sizes = LogSizes { checkpoint: 16, writer_checkpoints: 64 };
        let checkpointer = Checkpointer::writer_only(&db, sizes);
        write(&db, &checkpointer, 200);
        // A frame is a page and a 24-byte header; a commit adds a few frames past the size that triggers.
        let bound = (64 + 8) * (4096 + 24) + 32;
        assert!(length(&log(&path)) <= bound, "the log is {} bytes; expected at most {bound}", length(&log(&path)));
        assert!(length(&path) >= 100 * 8192, "the rows were copied into the file");
    }
}
