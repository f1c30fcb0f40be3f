//! TLS for the skills' HTTP clients (the `http` skill and MCP servers reached over HTTP): rustls, verifying
//! certificates against the system's roots.

use std::sync::Once;

/// Makes rustls's `ring` provider the process default, once, unless the application installed one of its own
/// (which is then used). reqwest builds its TLS from the process default, and without one it cannot make a
/// client at all (it panics). The `http` skill and the MCP client call this before they build one; call it
/// yourself before building a `reqwest` or `rmcp` HTTP client of your own in a process that uses agentry.
///
/// ```
/// agentry_skills::tls::install_provider();
/// let client = reqwest::Client::builder().build();
/// assert!(client.is_ok());
/// ```
pub fn install_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error means a provider is already installed: the application's choice stands.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The certificates in PEM text, for a client to trust; the error says what is wrong (not PEM, no certificate
/// in it, a broken one).
pub(crate) fn pem_certificates(pem: &str) -> Result<Vec<reqwest::Certificate>, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let ders = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("is not PEM: {e}"))?;
    if ders.is_empty() {
        return Err("holds no certificate".to_owned());
    }
    ders.iter()
        .map(|der| reqwest::Certificate::from_der(der).map_err(|e| format!("is not a certificate: {e}")))
        .collect()
}
