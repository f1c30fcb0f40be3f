//! OAuth for MCP servers that ask for it: what the client needs to know to get a token (how to register, which
//! scopes, where the user is sent back) and the one thing only the application can do, let the user log in.

use super::client::Setting;
use futures_util::future::BoxFuture;
use std::fmt;
use std::sync::Arc;

/// Lets the user log in: given the authorization URL, opens it for the user (a browser, a link in a chat) and
/// resolves to the URL the authorization server sent the user back to (the redirect URI with `code` and
/// `state`), or to why not.
pub type Authorize = Arc<dyn Fn(String) -> BoxFuture<'static, Result<String, String>> + Send + Sync>;

/// How to get a token from an MCP server's authorization server, when the server answers `401` with a
/// challenge: discovery of the server's protected-resource and authorization-server metadata, then a client id
/// (a client ID metadata document URL when the server supports them, a pre-registered id, or dynamic
/// registration), then the authorization-code flow with PKCE through [`OAuth::authorize`], then the token.
/// Tokens are kept in memory for the connection, and refreshed when they expire.
///
/// ```
/// use agentry_skills::mcp::{McpServer, OAuth};
/// let oauth = OAuth::new("http://127.0.0.1:8765/callback", |url: String| async move {
///     // Show `url` to the user, wait for the redirect to the callback, return the URL it came to.
///     Err::<String, String>(format!("open {url} to log in"))
/// })
/// .client_name("my-agent")
/// .scopes(["files:read"]);
/// let server = McpServer::http("files", "https://mcp.example.com/mcp").oauth(oauth);
/// ```
#[derive(Clone)]
pub struct OAuth {
    /// Where the authorization server sends the user back; [`OAuth::authorize`] receives them there.
    pub redirect_uri: String,
    /// The name to register under (dynamic client registration).
    pub client_name: String,
    /// A URL-based client id (a client ID metadata document), used when the server supports them.
    pub client_metadata_url: Option<String>,
    /// A client id registered ahead of time, used instead of registering.
    pub client_id: Option<String>,
    /// The pre-registered client's secret, if it has one (best from an environment variable).
    pub client_secret: Option<Setting>,
    /// The scopes to ask for; empty: those the server's challenge or metadata name.
    pub scopes: Vec<String>,
    /// Lets the user log in.
    pub authorize: Authorize,
}

impl OAuth {
    /// OAuth with the user sent back to `redirect_uri` and `authorize` letting them log in; the client registers
    /// itself as `agentry` unless told otherwise.
    pub fn new<F, Fut>(redirect_uri: impl Into<String>, authorize: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<String, String>> + Send + 'static,
    {
        Self {
            redirect_uri: redirect_uri.into(),
            client_name: "agentry".to_owned(),
            client_metadata_url: None,
            client_id: None,
            client_secret: None,
            scopes: Vec::new(),
            authorize: Arc::new(move |url| Box::pin(authorize(url))),
        }
    }

    /// The name to register under.
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// A client ID metadata document URL, the client id when the authorization server supports them.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }

    /// A pre-registered client id, and its secret if it has one (`Setting::Env("VAR")` keeps it out of the
    /// code and of files).
    pub fn client(mut self, id: impl Into<String>, secret: Option<Setting>) -> Self {
        self.client_id = Some(id.into());
        self.client_secret = secret;
        self
    }

    /// The scopes to ask for.
    pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }
}

impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth")
            .field("redirect_uri", &self.redirect_uri)
            .field("client_name", &self.client_name)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|s| match s {
                    Setting::Env(var) => format!("env {var}"),
                    Setting::Text(_) => "(text)".to_owned(),
                }),
            )
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

impl PartialEq for OAuth {
    /// Equal settings and the very same `authorize` function.
    fn eq(&self, other: &Self) -> bool {
        self.redirect_uri == other.redirect_uri
            && self.client_name == other.client_name
            && self.client_metadata_url == other.client_metadata_url
            && self.client_id == other.client_id
            && self.client_secret == other.client_secret
            && self.scopes == other.scopes
            && Arc::ptr_eq(&self.authorize, &other.authorize)
    }
}

impl Eq for OAuth {}
