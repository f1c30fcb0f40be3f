//! Hearing a server's notifications in the order it sent them. rmcp hands each notification to the client's
//! handler on a task of its own, while a call's result goes straight to the call: the last progress or log line
//! a server sends before its result could reach the handler after the call had ended, and be lost (the run
//! would end with its progress at 75%, say). This transport wrapper shows each notification to a listener as it
//! reads it, before it reads what comes next, so what a server says during a call reaches the call before its
//! result does.

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use std::future::Future;

/// A transport that calls `heard` with each notification it receives, in order, before passing it on.
pub(crate) struct InOrder<T, F> {
    inner: T,
    heard: F,
}

impl<T, F> InOrder<T, F> {
    pub(crate) fn new(inner: T, heard: F) -> Self {
        Self { inner, heard }
    }
}

impl<T, F> Transport<RoleClient> for InOrder<T, F>
where
    T: Transport<RoleClient>,
    F: Fn(&ServerNotification) + Send + 'static,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(notification) = &message {
            (self.heard)(&notification.notification);
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
