//! The request body a call keeps, up to [`RETRY_BUFFER`] bytes, to send
//! it again on another attempt, and the bodies each send reads.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as _, Frame};
use tonic::Status;

/// How many bytes of a call's request body the channel keeps to send it
/// again (grpc-go's retry buffer per call, 256 KiB): a call whose body is
/// longer is sent once, and not retried (a request the server never saw is
/// not sent again either).
pub const RETRY_BUFFER: usize = 256 * 1024;

/// Byte chunks in order, the first held inline: a unary message most often
/// comes, and is sent, in one chunk, which then needs no allocation.
#[derive(Default, Clone)]
pub(super) struct Chunks {
    first: Option<Bytes>,
    rest: std::collections::VecDeque<Bytes>,
}

impl Chunks {
    /// Adds `chunk` after the others.
    pub(super) fn push(&mut self, chunk: Bytes) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(chunk);
        } else {
            self.rest.push_back(chunk);
        }
    }

    /// Takes the first chunk.
    pub(super) fn pop_front(&mut self) -> Option<Bytes> {
        self.first.take().or_else(|| self.rest.pop_front())
    }

    /// The chunk at `index`, of chunks none of which was taken.
    fn get(&self, index: usize) -> Option<&Bytes> {
        match index {
            0 => self.first.as_ref(),
            _ => self.rest.get(index - 1),
        }
    }

    /// How many chunks there are.
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }
}

/// A call's request body, kept as it is read (up to [`RETRY_BUFFER`]
/// bytes) so that another attempt sends it again: each attempt sends a
/// [`Lent`] body, which replays what was kept, then reads on; or, for a
/// body read whole before the first send ([`Replay::read_ahead`]), the
/// same bytes each time ([`Whole`]).
pub(super) enum Replay {
    Reading(Arc<Mutex<Kept>>),
    Whole {
        /// What every send after the first sends.
        kept: Chunks,
        /// What the first send sends: the chunks as the caller's body gave
        /// them (slices of tonic's encoder buffer), which h2 frees once
        /// written, on the connection's task, as tonic's own channel
        /// lets them go; `kept` holds copies of the small ones
        /// ([`own`]).
        first: Mutex<Option<Chunks>>,
    },
}

impl Clone for Replay {
    fn clone(&self) -> Replay {
        match self {
            Replay::Reading(state) => Replay::Reading(state.clone()),
            Replay::Whole { kept, .. } => Replay::Whole {
                kept: kept.clone(),
                first: Mutex::new(None),
            },
        }
    }
}

pub(super) struct Kept {
    /// The caller's body, read by the attempt under way; dropped once it
    /// has ended (by the task that read its end: hyper's connection task,
    /// as tonic's own channel drops it).
    source: Option<tonic::body::Body>,
    /// What was read of it, in order, while it fits the buffer.
    chunks: Chunks,
    len: usize,
    /// A frame read ahead ([`Replay::read_ahead`]) and not kept (data
    /// past the buffer, trailers, an error): the next frame a send reads
    /// after the kept chunks, as if read from the source then.
    held: Option<Result<Frame<Bytes>, Status>>,
    /// Read past the buffer (or committed): what was read is not kept, and
    /// nothing can be sent again.
    spent: bool,
    /// The latest attempt's body: an older one reads nothing more.
    epoch: u64,
}

impl Replay {
    pub(super) fn new(source: tonic::body::Body) -> Replay {
        Replay::Reading(Arc::new(Mutex::new(Kept {
            source: Some(source),
            chunks: Chunks::default(),
            len: 0,
            held: None,
            spent: false,
            epoch: 0,
        })))
    }

    /// The caller's `source`, read in the caller's task, before the first
    /// send, as far as it is ready and fits the buffer: a unary stub's body
    /// (one message, encoded when read) is whole at once, and every send
    /// then has the same bytes ([`Whole`]), with no lock, and ends with its
    /// last DATA frame. What is not ready yet, or does not fit, is read by
    /// the sends as [`Replay::new`]'s.
    pub(super) fn read_ahead(mut source: tonic::body::Body) -> Replay {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut chunks = Chunks::default();
        let mut first = Chunks::default();
        let mut len = 0;
        let mut held = None;
        loop {
            match Pin::new(&mut source).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if len + data.len() <= RETRY_BUFFER => {
                        len += data.len();
                        chunks.push(own(&data));
                        first.push(data);
                    }
                    Ok(data) => {
                        held = Some(Ok(Frame::data(data)));
                        break;
                    }
                    Err(frame) => {
                        held = Some(Ok(frame));
                        break;
                    }
                },
                Poll::Ready(Some(Err(status))) => {
                    held = Some(Err(status));
                    break;
                }
                Poll::Ready(None) => {
                    return Replay::Whole {
                        kept: chunks,
                        first: Mutex::new(Some(first)),
                    };
                }
                Poll::Pending => break,
            }
        }
        Replay::Reading(Arc::new(Mutex::new(Kept {
            source: Some(source),
            chunks,
            len,
            held,
            spent: false,
            epoch: 0,
        })))
    }

    /// The body of the next send.
    pub(super) fn lend(&self) -> tonic::body::Body {
        let state = match self {
            Replay::Reading(state) => state,
            Replay::Whole { kept, first } => {
                let chunks = lock(first).take().unwrap_or_else(|| kept.clone());
                return tonic::body::Body::new(Whole { chunks });
            }
        };
        let epoch = {
            let mut kept = lock(state);
            kept.epoch += 1;
            kept.epoch
        };
        // Unlocked: `Body::new` asks the body whether it has ended.
        tonic::body::Body::new(Lent {
            state: state.clone(),
            epoch,
            next: 0,
        })
    }

    /// Whether what was read can be sent again: none of it was let go.
    pub(super) fn is_resendable(&self) -> bool {
        match self {
            Replay::Reading(state) => !lock(state).spent,
            Replay::Whole { .. } => true,
        }
    }

    /// The call is committed (its stream opened): nothing more is kept.
    pub(super) fn commit(&self) {
        if let Replay::Reading(state) = self {
            let mut kept = lock(state);
            kept.spent = true;
            kept.chunks = Chunks::default();
        }
    }
}

/// tonic's encoder writes a request into a buffer of 8 KiB (its default
/// `buffer_size`, grown for a larger message) and hands on a slice of it,
/// which holds the whole buffer.
const ENCODER_BUFFER: usize = 8 * 1024;

/// `chunk` to keep for the call's life: a copy of its bytes when they are
/// fewer than the encoder's buffer, which the chunk holds. tonic's own
/// channel lets that buffer go once the request is written; a kept slice
/// would hold it until the call ends (64 calls of a small message in
/// flight: 512 KiB for a few bytes each, which the allocator then gives
/// back to the system and faults in again, batch after batch). A larger
/// chunk is most of its buffer, and is kept as it is (no copy).
fn own(chunk: &Bytes) -> Bytes {
    if chunk.len() < ENCODER_BUFFER {
        Bytes::copy_from_slice(chunk)
    } else {
        chunk.clone()
    }
}

pub(super) fn lock<T>(state: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One send's request body of chunks all at hand: of a body read whole
/// ahead ([`Replay`]), or a typed unary call's one frame
/// ([`Whole::one`]). Its last DATA frame ends the stream.
pub(in crate::grpc::client) struct Whole {
    chunks: Chunks,
}

impl Whole {
    /// A body of one DATA frame, `chunk`, which ends the stream.
    pub(in crate::grpc::client) fn one(chunk: Bytes) -> Whole {
        Whole {
            chunks: Chunks {
                first: Some(chunk),
                rest: std::collections::VecDeque::new(),
            },
        }
    }
}

impl http_body::Body for Whole {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        Poll::Ready(self.chunks.pop_front().map(|chunk| Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.len() == 0
    }

    // No exact `size_hint`: hyper would add a `content-length` header,
    // which tonic's request, and the caller's body sent alone, have not.
}

/// One send's request body ([`Replay`]).
struct Lent {
    state: Arc<Mutex<Kept>>,
    epoch: u64,
    /// The next kept chunk to send.
    next: usize,
}

impl http_body::Body for Lent {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let mut kept = lock(&this.state);
        let kept = &mut *kept;
        if kept.epoch != this.epoch {
            // A later send took over.
            return Poll::Ready(None);
        }
        if !kept.spent
            && let Some(chunk) = kept.chunks.get(this.next)
        {
            this.next += 1;
            return Poll::Ready(Some(Ok(Frame::data(chunk.clone()))));
        }
        let read = match kept.held.take() {
            Some(read) => read,
            None => {
                let Some(source) = kept.source.as_mut() else {
                    // Ended.
                    return Poll::Ready(None);
                };
                match Pin::new(&mut *source).poll_frame(cx) {
                    Poll::Ready(Some(read)) => read,
                    Poll::Ready(None) => {
                        kept.source = None;
                        return Poll::Ready(None);
                    }
                    Poll::Pending => return Poll::Pending,
                }
            }
        };
        match read {
            Ok(frame) => {
                if let Some(data) = frame.data_ref()
                    && !kept.spent
                {
                    kept.len += data.len();
                    if kept.len > RETRY_BUFFER {
                        kept.spent = true;
                        kept.chunks = Chunks::default();
                    } else {
                        kept.chunks.push(data.clone());
                        this.next = kept.chunks.len();
                    }
                }
                // Known now, so the frame just read carries END_STREAM
                // (no empty DATA frame after it), as the caller's body
                // sent alone would.
                if kept
                    .source
                    .as_ref()
                    .is_some_and(http_body::Body::is_end_stream)
                {
                    kept.source = None;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Err(status) => {
                // The caller's body failed (an encoding error): what it
                // sends cannot be sent again.
                kept.spent = true;
                kept.chunks = Chunks::default();
                Poll::Ready(Some(Err(status)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        let kept = lock(&self.state);
        kept.epoch != self.epoch
            || (kept.source.is_none()
                && kept.held.is_none()
                && (kept.spent || self.next >= kept.chunks.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A caller's body that yields `script` in order (a `Pending` wakes
    /// nothing: the tests poll again), then ends; like tonic's encoding
    /// body, it never says it has ended before it is read to its end.
    struct Script(VecDeque<Step>);

    /// One read of a body.
    type Step = Poll<Option<Result<Frame<Bytes>, Status>>>;

    impl http_body::Body for Script {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Step {
            self.0.pop_front().unwrap_or(Poll::Ready(None))
        }
    }

    fn script(items: impl IntoIterator<Item = Step>) -> tonic::body::Body {
        tonic::body::Body::new(Script(items.into_iter().collect()))
    }

    fn data(bytes: &'static [u8]) -> Step {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(bytes)))))
    }

    /// What one send of `replay` reads: its data and whether it ended
    /// with them (its last DATA frame carries END_STREAM), or the error.
    fn send(replay: &Replay) -> Result<(Vec<Bytes>, bool), Status> {
        let mut body = replay.lend();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut read = Vec::new();
        let mut ended_with_data = false;
        loop {
            match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    read.push(frame.into_data().expect("data"));
                    ended_with_data = body.is_end_stream();
                    if ended_with_data {
                        return Ok((read, true));
                    }
                }
                Poll::Ready(Some(Err(status))) => return Err(status),
                Poll::Ready(None) => return Ok((read, ended_with_data)),
                Poll::Pending => {}
            }
        }
    }

    #[test]
    fn a_unary_body_is_read_ahead_and_each_send_ends_with_its_data() {
        let replay = Replay::read_ahead(script([data(b"\0\0\0\0\x01a"), Poll::Ready(None)]));
        assert!(matches!(replay, Replay::Whole { .. }));
        for _ in 0..2 {
            let (read, ended) = send(&replay).expect("sent");
            assert_eq!(read, [Bytes::from_static(b"\0\0\0\0\x01a")]);
            // One DATA frame with END_STREAM, no empty one after it.
            assert!(ended);
            assert!(replay.is_resendable());
        }
    }

    /// The buffer a chunk was sliced from, which says when it is freed.
    struct Buffer {
        bytes: Vec<u8>,
        freed: Arc<std::sync::atomic::AtomicBool>,
    }

    impl AsRef<[u8]> for Buffer {
        fn as_ref(&self) -> &[u8] {
            &self.bytes
        }
    }

    impl Drop for Buffer {
        fn drop(&mut self) {
            self.freed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_small_message_read_ahead_lends_the_encoders_buffer_to_the_first_send_only() {
        let freed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut bytes = vec![0u8; ENCODER_BUFFER];
        bytes[..6].copy_from_slice(b"\0\0\0\0\x01a");
        // As tonic's encoder hands on a message: a slice of its buffer.
        let chunk = Bytes::from_owner(Buffer {
            bytes,
            freed: freed.clone(),
        })
        .slice(..6);
        let replay = Replay::read_ahead(script([
            Poll::Ready(Some(Ok(Frame::data(chunk)))),
            Poll::Ready(None),
        ]));
        assert!(matches!(replay, Replay::Whole { .. }));
        // The first send has the buffer, as tonic's own channel sends it,
        // and lets it go once sent; the call keeps a copy.
        assert!(!freed.load(std::sync::atomic::Ordering::SeqCst));
        for _ in 0..2 {
            let (read, ended) = send(&replay).expect("sent");
            assert_eq!(read, [Bytes::from_static(b"\0\0\0\0\x01a")]);
            assert!(ended);
            drop(read);
            assert!(freed.load(std::sync::atomic::Ordering::SeqCst));
        }
    }

    #[test]
    fn a_body_not_ready_ahead_is_read_by_the_send_and_kept() {
        let replay = Replay::read_ahead(script([
            data(b"ab"),
            Poll::Pending,
            data(b"cd"),
            Poll::Ready(None),
        ]));
        assert!(matches!(replay, Replay::Reading(_)));
        let whole = [Bytes::from_static(b"ab"), Bytes::from_static(b"cd")];
        assert_eq!(send(&replay).expect("sent").0, whole);
        assert!(replay.is_resendable());
        assert_eq!(send(&replay).expect("sent again").0, whole);
    }

    #[test]
    fn a_body_failing_ahead_fails_its_first_send_which_is_not_sent_again() {
        let failed = Status::out_of_range("too large to encode");
        let replay = Replay::read_ahead(script([
            data(b"ab"),
            Poll::Ready(Some(Err(failed.clone()))),
        ]));
        assert!(replay.is_resendable());
        let status = send(&replay).expect_err("the body's error");
        assert_eq!(status.code(), failed.code());
        assert_eq!(status.message(), failed.message());
        assert!(!replay.is_resendable());
    }

    #[test]
    fn a_body_over_the_buffer_ahead_is_sent_once() {
        static BIG: [u8; RETRY_BUFFER + 1] = [7; RETRY_BUFFER + 1];
        let replay = Replay::read_ahead(script([data(b"ab"), data(&BIG), Poll::Ready(None)]));
        assert!(replay.is_resendable());
        let (read, _) = send(&replay).expect("sent");
        assert_eq!(read.len(), 2);
        assert_eq!(read[1].len(), RETRY_BUFFER + 1);
        assert!(!replay.is_resendable());
    }
}
