//! A node's gate: the one actor of a node that other nodes talk to. It is a member of the process group of each
//! agent its node holds, so a peer finds it by agent id (ractor_cluster does not sync its name registry, and
//! syncs process groups). It takes a request as bytes, answers it through the node's handler on a task of its
//! own (a slow agent never holds up the gate), and replies with bytes: nothing typed crosses the wire but this.

use super::codec::{self, WireReply};
use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What a node does with a request from a peer.
pub type Handler = Arc<dyn Fn(codec::WireRequest) -> Pin<Box<dyn Future<Output = WireReply> + Send>> + Send + Sync>;

/// The gate's one message: a request's bytes, and where its reply's bytes go.
pub(crate) enum GateMsg {
    Ask(Vec<u8>, RpcReplyPort<Vec<u8>>),
}

/// The name of the request on the wire.
const ASK: &str = "agentry.ask";

impl ractor::Message for GateMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        let GateMsg::Ask(args, reply) = self;
        Ok(SerializedMessage::Call { variant: ASK.to_owned(), args, reply, metadata: None })
    }

    /// Anything but a request is refused here (ractor drops it, and its reply port with it).
    fn deserialize(bytes: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        match bytes {
            SerializedMessage::Call { variant, args, reply, .. } if variant == ASK => Ok(GateMsg::Ask(args, reply)),
            _ => Err(BoxedDowncastErr),
        }
    }
}

/// The most requests from peers a gate answers at once; more are refused (`busy`) until some are answered.
pub(crate) const MAX_IN_FLIGHT: usize = 1024;

/// The gate actor.
pub(crate) struct Gate;

impl Actor for Gate {
    type Msg = GateMsg;
    type State = (Handler, Arc<tokio::sync::Semaphore>);
    type Arguments = Handler;

    async fn pre_start(&self, _myself: ActorRef<GateMsg>, handler: Handler) -> Result<Self::State, ActorProcessingErr> {
        Ok((handler, Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT))))
    }

    async fn handle(
        &self,
        _myself: ActorRef<GateMsg>,
        message: GateMsg,
        (handler, in_flight): &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let GateMsg::Ask(bytes, reply) = message;
        let Ok(permit) = in_flight.clone().try_acquire_owned() else {
            let busy = format!("the node is busy: {MAX_IN_FLIGHT} requests from peers are under way; try again later");
            let _ = reply.send(codec::encode(&WireReply::Failed { reason: busy }));
            return Ok(());
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let answer = match codec::decode_request(&bytes) {
                Ok(request) => handler(request).await,
                Err(malformed) => {
                    tracing::warn!(%malformed, "a peer sent a request that could not be decoded");
                    WireReply::Failed { reason: malformed.to_string() }
                }
            };
            let _ = reply.send(codec::encode(&answer));
        });
        Ok(())
    }
}
