//! The link between a coordinator and one agent: a bounded channel each way carrying the protocol's
//! messages, whatever carries them underneath (in-process for the embedded agent, a gRPC stream either
//! way for remote ones), and why it closed. Every gRPC stream is adapted here, once, so a transport's
//! reason for closing ("message too large", a TLS alert) reaches whoever reads the link; and the one
//! log line every refused peer gets, wherever it is refused (`log_refused`). Dialing a control port is
//! `dial`'s; accepting one is `listener`'s.
use std::pin::Pin;

use proto::pb;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

/// The two ends of the control protocol, for words that name the other side ("the agent listens in
/// plain text") and the flags to give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Agent,
    Coordinator,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Agent => "agent",
            Side::Coordinator => "coordinator",
        }
    }

    /// The far end of a link whose near end is `self`.
    pub fn other(self) -> Side {
        match self {
            Side::Agent => Side::Coordinator,
            Side::Coordinator => Side::Agent,
        }
    }
}

/// Logs a peer that `me` refused: the one line every refusal gets, wherever it is decided. At most
/// one line a second per reason; the next line says how many like it were not logged.
pub fn log_refused(me: Side, peer: &dyn std::fmt::Display, why: &dyn std::fmt::Display) {
    let why = why.to_string();
    let Some(unsaid) = hush(me, &why) else {
        return;
    };
    match (me, unsaid) {
        (Side::Agent, 0) => tracing::warn!(peer = %peer, reason = %why, "Refused a coordinator"),
        (Side::Agent, n) => {
            tracing::warn!(peer = %peer, reason = %why, unlogged = n, "Refused a coordinator")
        }
        (Side::Coordinator, 0) => tracing::warn!(peer = %peer, reason = %why, "Refused an agent"),
        (Side::Coordinator, n) => {
            tracing::warn!(peer = %peer, reason = %why, unlogged = n, "Refused an agent")
        }
    }
}

/// When each reason was last logged, and how many of it since were not.
static SAID: shared::hush::Hush<(bool, String)> = shared::hush::Hush::new();

/// Whether `why` (of `me`) is logged now: how many like it were not since, or `None`.
pub(crate) fn hush(me: Side, why: &str) -> Option<u64> {
    SAID.due(
        (me == Side::Agent, why.to_string()),
        std::time::Instant::now(),
    )
}

/// Bound on queued control messages each way; a coordinator that stops reading slows the agent's
/// reports, it does not grow memory.
pub const LINK_CAPACITY: usize = 64;

/// The largest control message accepted or sent. Interval reports are a few KiB; a plan with a long URL
/// list is the largest message and still far below this.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Why a link's inbound side ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Closed {
    /// The far end finished its stream.
    #[error("its stream closed")]
    Ended,
    /// The connection went away without a clean end (a process gone, a reset): how it went.
    #[error("its connection dropped ({0})")]
    Dropped(String),
    /// Something was refused on the way (a message too large or undecodable, a status the far end
    /// sent): what was said, in words.
    #[error("its stream broke: {0}")]
    Broken(String),
}

impl Closed {
    /// A stream's failure status, sorted: a connection that went away is not a refusal.
    pub fn of_status(status: &tonic::Status) -> Closed {
        use tonic::Code;
        let words = status_in_words(status);
        match status.code() {
            // tonic says Internal for an h2 reset too; only its decoder's Internal names the message.
            Code::Internal if status.message().contains("decode") => Closed::Broken(words),
            Code::Unknown | Code::Internal | Code::Cancelled | Code::Unavailable => {
                Closed::Dropped(words)
            }
            _ => Closed::Broken(words),
        }
    }
}

/// What travels on a link's channels: a message, or the reason the stream stopped.
type Frame<M> = Result<M, Closed>;

/// The sending half of a link. Clones send on the same stream (the heartbeat beside the run).
pub struct LinkTx<M>(mpsc::Sender<Frame<M>>);

impl<M> Clone for LinkTx<M> {
    fn clone(&self) -> Self {
        LinkTx(self.0.clone())
    }
}

impl<M> LinkTx<M> {
    /// Fails once the far end is gone.
    pub async fn send(&self, msg: M) -> Result<(), Closed> {
        self.0.send(Ok(msg)).await.map_err(|_| Closed::Ended)
    }

    /// Ends the stream with a reason the far end reads from its [`LinkRx::recv`].
    pub async fn close(self, why: Closed) {
        let _ = self.0.send(Err(why)).await;
    }
}

/// The receiving half of a link.
pub struct LinkRx<M>(mpsc::Receiver<Frame<M>>);

impl<M> LinkRx<M> {
    /// The next message, or why there will be none. After the first `Err`, every call says `Ended`.
    pub async fn recv(&mut self) -> Result<M, Closed> {
        match self.0.recv().await {
            Some(Ok(msg)) => Ok(msg),
            Some(Err(why)) => {
                self.0.close();
                Err(why)
            }
            None => Err(Closed::Ended),
        }
    }
}

/// One bounded channel of a link.
pub fn channel<M>() -> (LinkTx<M>, LinkRx<M>) {
    let (tx, rx) = mpsc::channel(LINK_CAPACITY);
    (LinkTx(tx), LinkRx(rx))
}

/// One end of a link: what it sends, and what it receives.
pub struct Link<Out, In> {
    pub tx: LinkTx<Out>,
    pub rx: LinkRx<In>,
}

/// The end a coordinator holds to drive one agent.
pub type CoordinatorEnd = Link<pb::CoordinatorMessage, pb::AgentMessage>;
/// The end an agent's session holds.
pub type AgentEnd = Link<pb::AgentMessage, pb::CoordinatorMessage>;

/// Both ends of an in-process link.
pub fn pair() -> (CoordinatorEnd, AgentEnd) {
    let (down_tx, down_rx) = channel();
    let (up_tx, up_rx) = channel();
    (
        Link {
            tx: down_tx,
            rx: up_rx,
        },
        Link {
            tx: up_tx,
            rx: down_rx,
        },
    )
}

/// A gRPC status in words: its message, then the causes under it that it does not already say (a
/// TLS refusal says why only down there).
pub fn status_in_words(status: &tonic::Status) -> String {
    let mut text = status.message().to_string();
    let mut source = std::error::Error::source(status);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&more);
        }
        source = s.source();
    }
    if text.is_empty() {
        text = format!("gRPC status {:?}", status.code());
    }
    text
}

/// Reads a gRPC stream into a link's receiving half. The stream's clean end is `Ended`; a status is
/// sorted by [`Closed::of_status`]: a connection gone is `Dropped`, a refused message `Broken`.
pub fn read_stream<M: Send + 'static>(inbound: tonic::Streaming<M>) -> LinkRx<M> {
    read(inbound, None)
}

/// [`read_stream`] for a listener: a message it refused for its size is logged as a refused peer
/// (`me` refused `peer`), which the reader of the link, not knowing the address, could not do.
pub fn read_peer_stream<M: Send + 'static>(
    inbound: tonic::Streaming<M>,
    me: Side,
    peer: String,
) -> LinkRx<M> {
    read(inbound, Some((me, peer)))
}

fn read<M: Send + 'static>(
    mut inbound: tonic::Streaming<M>,
    mut listener: Option<(Side, String)>,
) -> LinkRx<M> {
    let (tx, rx) = mpsc::channel(LINK_CAPACITY);
    tokio::spawn(async move {
        loop {
            let frame = match inbound.message().await {
                Ok(Some(msg)) => Ok(msg),
                Ok(None) => return,
                Err(status) => {
                    // tonic's word for a message over the size limit.
                    if status.code() == tonic::Code::OutOfRange
                        && let Some((me, peer)) = listener.take()
                    {
                        log_refused(me, &peer, &status_in_words(&status));
                    }
                    Err(Closed::of_status(&status))
                }
            };
            let last = frame.is_err();
            if tx.send(frame).await.is_err() || last {
                return;
            }
        }
    });
    LinkRx(rx)
}

/// A gRPC server's response stream.
pub type ResponseStream<M> = Pin<Box<dyn Stream<Item = Result<M, tonic::Status>> + Send>>;

/// A link's receiving half as a gRPC server's response stream: a close with a reason ends it with
/// that reason as the status the client reads.
pub fn response_stream<M: Send + 'static>(rx: LinkRx<M>) -> ResponseStream<M> {
    Box::pin(ReceiverStream::new(rx.0).map(|frame| {
        frame.map_err(|why| match why {
            Closed::Ended => tonic::Status::cancelled("the session ended"),
            Closed::Dropped(words) => tonic::Status::cancelled(words),
            Closed::Broken(words) => tonic::Status::aborted(words),
        })
    }))
}

/// A link's receiving half as a gRPC client's request stream: it ends at the first close.
pub fn request_stream<M: Send + 'static>(rx: LinkRx<M>) -> impl Stream<Item = M> + Send + 'static {
    ReceiverStream::new(rx.0).map_while(Result::ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_was_a_log_line_so_a_crowd_flooded_the_log() {
        let why = "a reason only this test gives";
        assert_eq!(hush(Side::Agent, why), Some(0));
        for _ in 0..100 {
            assert_eq!(hush(Side::Agent, why), None);
        }
        // The other listener's line of the same words is its own.
        assert_eq!(hush(Side::Coordinator, why), Some(0));
        std::thread::sleep(shared::hush::LOG_EVERY + std::time::Duration::from_millis(50));
        assert_eq!(
            hush(Side::Agent, why),
            Some(100),
            "the next line counts the rest"
        );
        assert_eq!(hush(Side::Agent, why), None);
    }

    #[tokio::test]
    async fn a_close_reason_reaches_the_reader_once() {
        let (tx, mut rx) = channel::<u32>();
        tx.send(7).await.unwrap();
        tx.clone()
            .close(Closed::Broken("message too large".into()))
            .await;
        assert_eq!(rx.recv().await, Ok(7));
        assert_eq!(
            rx.recv().await,
            Err(Closed::Broken("message too large".into()))
        );
        assert_eq!(rx.recv().await, Err(Closed::Ended));
        assert_eq!(
            tx.send(8).await,
            Err(Closed::Ended),
            "closed after the reason"
        );
    }

    #[test]
    fn a_refused_message_is_told_apart_from_a_connection_gone() {
        let too_large = tonic::Status::out_of_range("decoded message length too large");
        assert!(
            matches!(Closed::of_status(&too_large), Closed::Broken(w) if w.contains("too large"))
        );
        let undecodable = tonic::Status::internal("failed to decode Protobuf message");
        assert!(matches!(Closed::of_status(&undecodable), Closed::Broken(_)));
        let reset =
            tonic::Status::unknown("h2 protocol error: error reading a body from connection");
        assert!(matches!(Closed::of_status(&reset), Closed::Dropped(_)));
    }

    #[tokio::test]
    async fn a_dropped_sender_reads_as_ended() {
        let (tx, mut rx) = channel::<u32>();
        drop(tx);
        assert_eq!(rx.recv().await, Err(Closed::Ended));
    }
}
