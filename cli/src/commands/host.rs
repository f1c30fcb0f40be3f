//! A runtime this process holds for one command (`call`, `serve-mcp`): started from the manifest, with its
//! control socket served so the operator's tools in another terminal reach it (an approval, say), and shut
//! down cleanly at the end.

use super::control::{Pending, bind, serve, socket_path};
use crate::error::CliError;
use crate::manifest::Loaded;
use crate::registry::Registry;
use crate::start::Started;
use std::path::PathBuf;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long runs in flight get to end when the command is done.
const GRACE: Duration = Duration::from_secs(10);

/// The runtime, and what serves it.
pub struct Hosted {
    /// The runtime and what it started.
    pub started: Started,
    tasks: Vec<JoinHandle<()>>,
    data: PathBuf,
    /// The data folder's lock, released last.
    lock: std::fs::File,
}

/// Starts the manifest's runtime here, unless another process holds its data folder.
pub async fn host(loaded: &Loaded, registry: &Registry) -> Result<Hosted, CliError> {
    let data = crate::start::data_dir(loaded);
    crate::start::make_data_dir(&data)?;
    let held = bind(&data).await.map_err(|e| CliError::Start(format!("{e}; ask it instead, or stop it first")))?;
    let started = crate::start::start(loaded, registry).await?;
    let runtime = started.runtime.clone();
    let pending = Pending::default();
    let mut events = runtime.events();
    let follower = {
        let pending = pending.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => pending.follow(&event),
                    // Missed events (a burst of progress, say) leave what is pending as it was; go on.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        })
    };
    let super::control::Held { lock, listener } = held;
    let server = tokio::spawn(serve(listener, runtime, pending));
    Ok(Hosted { started, tasks: vec![follower, server], data, lock })
}

impl Hosted {
    /// Shuts the runtime down cleanly and stops serving its socket.
    pub async fn close(self) {
        self.started.runtime.shutdown(GRACE).await;
        for task in &self.tasks {
            task.abort();
        }
        let _ = std::fs::remove_file(socket_path(&self.data));
        drop(self.lock);
    }
}
