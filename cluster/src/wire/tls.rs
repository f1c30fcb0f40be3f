//! TLS between nodes from PEM text: each node shows its certificate and checks its peer's, both ways (mutual
//! TLS), against the certificates the cluster trusts. A peer without a trusted certificate is refused in the
//! handshake, before it can say a word of the cluster's protocol.

use super::WireTls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::sync::Arc;

/// Why TLS between nodes could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM text could not be read.
    #[error("the {what} is not valid PEM: {reason}; expected {expected}")]
    Pem {
        /// Which text.
        what: &'static str,
        /// Why.
        reason: String,
        /// What it should hold.
        expected: &'static str,
    },
    /// rustls refused the certificates or the key.
    #[error("TLS between nodes could not be set up: {0}")]
    Config(String),
}

impl WireTls {
    /// TLS with this node's certificate chain and private key, checking peers against `trusted` (PEM
    /// certificates: the cluster's CA, or the nodes' own certificates), peers' certificates being for `name`.
    pub fn from_pem(chain: &str, key: &str, trusted: &str, name: &str) -> Result<Self, TlsError> {
        let certs = |pem: &str, what| {
            let certs: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>().map_err(|e| {
                    TlsError::Pem { what, reason: e.to_string(), expected: "one or more CERTIFICATE blocks" }
                })?;
            match certs.is_empty() {
                true => Err(TlsError::Pem {
                    what,
                    reason: "no certificate".into(),
                    expected: "one or more CERTIFICATE blocks",
                }),
                false => Ok(certs),
            }
        };
        let chain = certs(chain, "certificate chain")?;
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| TlsError::Pem {
            what: "private key",
            reason: e.to_string(),
            expected: "a PRIVATE KEY block",
        })?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in certs(trusted, "trusted certificates")? {
            roots.add(cert).map_err(|e| TlsError::Config(e.to_string()))?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = |e: rustls::Error| TlsError::Config(e.to_string());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(config)?;
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(config)?;
        let server_name = ServerName::try_from(name.to_owned())
            .map_err(|e| TlsError::Config(format!("`{name}` is not a server name: {e}")))?;
        Ok(Self {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
            connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
            server_name,
            node_names: false,
        })
    }

    /// Also checks that each peer's certificate names the node it says it is (a DNS name among its subject
    /// alternative names), both ways: a node holding a certificate the cluster trusts, but issued to another
    /// node, cannot pass for a third. Each node's certificate must then name the cluster (the `name` given to
    /// [`WireTls::from_pem`], which a dialing node checks as TLS does) and the node itself, whose name must be a
    /// DNS name (`node-a`, `node-a.agents.internal`).
    #[must_use]
    pub fn checking_node_names(mut self) -> Self {
        self.node_names = true;
        self
    }
}

/// Whether `cert` names `node`: `Err` says why not.
pub(crate) fn names(cert: &CertificateDer<'_>, node: &str) -> Result<(), String> {
    let parsed = rustls::server::ParsedCertificate::try_from(cert).map_err(|e| e.to_string())?;
    let name = ServerName::try_from(node).map_err(|e| format!("not a DNS name: {e}"))?;
    rustls::client::verify_server_name(&parsed, &name).map_err(|e| e.to_string())
}
