//! A provider on loopback that answers with recorded wire fixtures, one per request, in order, and keeps what
//! it was sent.

#![allow(dead_code)]

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// One canned answer.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    pub content_type: &'static str,
}

impl Reply {
    /// A JSON answer read from `fixtures/<name>`.
    pub fn json(status: u16, name: &str) -> Self {
        Self { status, headers: Vec::new(), body: fixture(name), content_type: "application/json" }
    }

    /// A stream of server-sent events read from `fixtures/<name>`.
    pub fn sse(name: &str) -> Self {
        Self { status: 200, headers: Vec::new(), body: fixture(name), content_type: "text/event-stream" }
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }
}

/// A fixture's bytes.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// What the provider was sent.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: serde_json::Value,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
}

/// The provider: its base URL and what it was sent.
pub struct Provider {
    pub base_url: String,
    shared: Arc<Shared>,
}

impl Provider {
    /// Starts answering with `replies`, in order (a request past them gets a 500).
    pub async fn start(replies: Vec<Reply>) -> Self {
        let shared = Arc::new(Shared { replies: Mutex::new(replies.into()), received: Mutex::default() });
        let app = axum::Router::new().fallback(answer).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base_url: format!("http://{address}"), shared }
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("not poisoned").clone()
    }
}

async fn answer(State(shared): State<Arc<Shared>>, uri: axum::http::Uri, headers: HeaderMap, body: Bytes) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    shared.received.lock().expect("not poisoned").push(Received { path: uri.path().to_owned(), headers, body });
    let Some(reply) = shared.replies.lock().expect("not poisoned").pop_front() else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "no reply left").into_response();
    };
    let mut response = (StatusCode::from_u16(reply.status).expect("a status"), reply.body).into_response();
    let out = response.headers_mut();
    out.insert(header::CONTENT_TYPE, reply.content_type.parse().expect("a header value"));
    for (name, value) in reply.headers {
        out.insert(name, value.parse().expect("a header value"));
    }
    response
}
