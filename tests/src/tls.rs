//! TLS servers on loopback for the tests: a self-signed certificate for `localhost`, and a listener that
//! completes the TLS handshake before axum sees a connection.

use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A TCP listener that completes a TLS handshake on each connection before axum sees it; a client that fails
/// the handshake (because it does not trust the certificate) is dropped and the next one accepted.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else { continue };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

impl TlsListener {
    /// A listener on a free loopback port with a fresh self-signed certificate for `localhost`; returns it, its
    /// port and the certificate's PEM (for a client to trust).
    pub async fn localhost() -> (Self, u16, String) {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
        let pem = certified.cert.pem();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(certified.cert.der().to_vec())], key)
            .expect("a server config");
        let tcp = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let port = tcp.local_addr().expect("an address").port();
        (Self { tcp, acceptor: TlsAcceptor::from(Arc::new(config)) }, port, pem)
    }
}
