//! Knowing when a streamable HTTP session's standalone stream is open. A server may send its requests (an
//! elicitation during a call, say) on the session's standalone SSE stream rather than on the call's own
//! response; a server without an event store drops what it sends there while that stream is not open yet. rmcp
//! opens the stream in a task of its own after the handshake and tells nobody, so a call made at once can race
//! it: under load the server runs the call before the stream exists, and the call's elicitation is lost (the
//! call then hangs until its timeout). This client wrapper says when the stream's request has been answered, and
//! `connect` waits for that (a few seconds at most) before the session is used.

use futures_util::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;

/// An HTTP client for rmcp that tells [`StreamReady::opened`] once the session's standalone stream was asked
/// for and answered (opened, refused, or not offered by the server).
#[derive(Clone)]
pub(crate) struct StreamReady<C> {
    inner: C,
    answered: Arc<watch::Sender<bool>>,
}

impl<C> StreamReady<C> {
    pub(crate) fn new(inner: C) -> Self {
        Self { inner, answered: Arc::new(watch::Sender::new(false)) }
    }

    /// Notes that the standalone stream's request was answered, when `standalone` (a resumed stream's is not).
    fn answered_if(&self, standalone: bool) {
        if standalone {
            self.answered.send_replace(true);
        }
    }

    /// Resolves once the standalone stream's request was answered, or after `within` (a server that never
    /// answers it still gets its session).
    pub(crate) async fn opened(&self, within: std::time::Duration) {
        let mut answered = self.answered.subscribe();
        let _ = tokio::time::timeout(within, answered.wait_for(|answered| *answered)).await;
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for StreamReady<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.inner.post_message(uri, message, session_id, auth_header, custom_headers).await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.inner
            .post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let standalone = last_event_id.is_none();
        let opened = self.inner.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await;
        self.answered_if(standalone);
        opened
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let standalone = last_event_id.is_none();
        let opened = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.answered_if(standalone);
        opened
    }
}
