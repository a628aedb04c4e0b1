//! [`Watched`]: a client transport that counts `notifications/tools/list_changed` as it
//! reads them, before the SDK's service loop sees the message.
//!
//! The SDK hands notifications to a client handler on a spawned task, so a handler could
//! learn of a change only after the response that followed it on the wire; counted here,
//! in the transport's (sequential) `receive`, a change the server sent before a call's
//! result is known when that call returns, and the run's next LLM call lists again.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// A transport that passes everything through and counts tool-list changes.
pub(crate) struct Watched<T> {
    pub(crate) inner: T,
    /// Increased by one for each `notifications/tools/list_changed` received.
    pub(crate) changed: Arc<AtomicU64>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Watched<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let changed = Arc::clone(&self.changed);
        let next = self.inner.receive();
        async move {
            let message = next.await;
            if let Some(JsonRpcMessage::Notification(n)) = &message
                && matches!(
                    n.notification,
                    ServerNotification::ToolListChangedNotification(_)
                )
            {
                changed.fetch_add(1, Ordering::SeqCst);
            }
            message
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
