//! A connection to PostgreSQL that opens itself again once it dropped (the server restarted, the network blinked,
//! an operator ended the session): the statement that found it dropped fails, and the next one runs on a new
//! connection. A node keeps every connection it has this way, so it outlives a restart of the database.

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio_postgres::{Client, NoTls};

/// See the module docs.
pub(crate) struct Db {
    url: String,
    /// What the connection is for, in the logs.
    what: &'static str,
    client: RwLock<Client>,
}

impl Db {
    /// Connects to `url` (a libpq connection string) and makes the cluster's tables if they are missing.
    pub(crate) async fn connect(url: &str, what: &'static str) -> Result<Self, tokio_postgres::Error> {
        let client = open(url, what).await?;
        client.batch_execute(agentry::store::CLUSTER_TABLES).await?;
        Ok(Self { url: url.to_owned(), what, client: RwLock::new(client) })
    }

    /// The connection, for statements on their own (several may share it at once, pipelined), opened again
    /// first if it dropped.
    pub(crate) async fn shared(&self) -> Result<RwLockReadGuard<'_, Client>, tokio_postgres::Error> {
        {
            let client = self.client.read().await;
            if !client.is_closed() {
                return Ok(client);
            }
        }
        Ok(self.alone().await?.downgrade())
    }

    /// The connection to itself, for a transaction, opened again first if it dropped.
    pub(crate) async fn alone(&self) -> Result<RwLockWriteGuard<'_, Client>, tokio_postgres::Error> {
        let mut client = self.client.write().await;
        if client.is_closed() {
            tracing::warn!(what = self.what, "the connection to PostgreSQL dropped: opening it again");
            *client = open(&self.url, self.what).await?;
        }
        Ok(client)
    }
}

/// How long opening a connection may take unless the connection string says (`connect_timeout`): a database
/// that does not answer fails the statement rather than holding up the node.
const CONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens a connection, driven by a task of its own until it ends.
pub(crate) async fn open(url: &str, what: &'static str) -> Result<Client, tokio_postgres::Error> {
    let mut config: tokio_postgres::Config = url.parse()?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_WAIT);
    }
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(%error, what, "a connection to PostgreSQL ended");
        }
    });
    Ok(client)
}
