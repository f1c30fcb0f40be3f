//! Accepting peers: this node's own listener in front of ractor_cluster's sessions. ractor_cluster's listener
//! completes each TLS handshake inside its accept loop, without a time limit, so one peer that opens a
//! connection and says nothing would keep every other peer out. Here each connection's TLS handshake runs apart,
//! bounded in time, with at most [`MAX_HANDSHAKES`] under way at once (more are closed at once); a session that
//! is not ready (authenticated, its state exchanged) within [`HANDSHAKE_WAIT`] is closed by the wire's watcher.

use super::WireEvent;
use ractor::ActorRef;
use ractor_cluster::{BoxRead, BoxWrite, ClusterBidiStream, NodeServerMessage};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, broadcast};

/// The longest a peer's connection may take to be ready: its TLS handshake, then its session's.
pub const HANDSHAKE_WAIT: Duration = Duration::from_secs(10);

/// The most connections whose handshakes may be under way at once (TLS, then the session's); more are closed
/// as they come.
pub const MAX_HANDSHAKES: usize = 64;

/// A connected stream handed to ractor_cluster as an external transport, labelled for its session's `peer_addr`.
pub(crate) struct Handed<S> {
    pub(crate) stream: S,
    pub(crate) peer: String,
}

impl<S: AsyncRead + AsyncWrite + Send + Unpin + 'static> ClusterBidiStream for Handed<S> {
    fn split(self: Box<Self>) -> (BoxRead, BoxWrite) {
        let (read, write) = tokio::io::split(self.stream);
        (Box::new(read), Box::new(write))
    }

    fn peer_label(&self) -> Option<String> {
        Some(self.peer.clone())
    }
}

/// Accepts peers on `listener` until the returned task is aborted: each connection, once through its TLS
/// handshake (when `tls` is set), becomes a session of the node server `server`.
pub(crate) fn serve(
    listener: TcpListener,
    server: ActorRef<NodeServerMessage>,
    (tls, certified): (Option<tokio_rustls::TlsAcceptor>, Option<super::Certified>),
    events: broadcast::Sender<WireEvent>,
    handshakes: Arc<Semaphore>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                // Out of file descriptors, say: a moment for some to close, rather than a loop that spins.
                Err(err) => {
                    tracing::warn!(%err, "the wire could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let peer = peer.to_string();
            let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "a peer's connection was closed: {MAX_HANDSHAKES} handshakes are under way");
                let _ = events.send(WireEvent::Refused { peer });
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let (server, tls, events, certified) = (server.clone(), tls.clone(), events.clone(), certified.clone());
            tokio::spawn(async move {
                let stream: Box<dyn ClusterBidiStream> = match tls {
                    None => Box::new(Handed { stream: tcp, peer: peer.clone() }),
                    Some(acceptor) => match tokio::time::timeout(HANDSHAKE_WAIT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            // Kept until its session says which node it is (when node names are checked).
                            let cert = stream.get_ref().1.peer_certificates().and_then(|certs| certs.first());
                            if let (Some(certified), Some(cert)) = (&certified, cert) {
                                let mut certified = certified.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                                certified.insert(peer.clone(), cert.clone().into_owned());
                            }
                            Box::new(Handed { stream, peer: peer.clone() })
                        }
                        Ok(Err(err)) => {
                            tracing::debug!(%peer, %err, "a peer failed the TLS handshake");
                            let _ = events.send(WireEvent::Refused { peer });
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "a peer did not finish the TLS handshake in time");
                            let _ = events.send(WireEvent::Refused { peer });
                            return;
                        }
                    },
                };
                // The session's own handshake is bounded by the wire's watcher, in time and in number.
                drop(permit);
                let _ = server.cast(NodeServerMessage::ConnectionOpenedExternal { stream, is_server: true });
            });
        }
    })
}
