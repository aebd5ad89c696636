//! The client's decoding limit ([`Settings::max_decoding_message_size`]):
//! a response message longer than it ends the call `ResourceExhausted`,
//! as grpc-go, gRPC's C core and grpc-java answer a message over their
//! receiving limit (tonic's decoder says `OutOfRange`, which the default
//! classification would count as the dependency working).
//!
//! The limit is applied where the client reads a frame's head: the typed
//! unary reader and the channel's unary reader read it themselves; every
//! other response body (a typed stream's, which tonic's `Streaming`
//! decodes; a stream through the channel, which the stock client decodes;
//! a typed unary response handed to tonic) is read through [`Limited`],
//! which fails the body at the head of a message over the limit, before
//! tonic's decoder sees it. So a status is rewritten only when the limit is
//! exceeded here, never when a server sends one: a server's own
//! `OutOfRange` for a request over *its* limit is returned as it is.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tonic::Status;

use super::layer::BoxError;

/// [`Settings::max_decoding_message_size`]'s default: 4 MiB, tonic's.
pub(super) const DEFAULT: usize = 4 * 1024 * 1024;

/// The length of a gRPC frame's head: its compressed flag and its
/// message's length.
pub(super) const FRAME_HEAD: usize = 5;

/// The length of the message a frame's `head` announces, in bytes.
pub(super) fn message_len(head: &[u8; FRAME_HEAD]) -> usize {
    u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize
}

/// Copies into `head` the bytes of `chunk` that belong to a body's first
/// frame head, `read` bytes of the body having come before `chunk`.
pub(super) fn read_head(head: &mut [u8; FRAME_HEAD], read: usize, chunk: &[u8]) {
    if read < FRAME_HEAD {
        let n = (FRAME_HEAD - read).min(chunk.len());
        head[read..read + n].copy_from_slice(&chunk[..n]);
    }
}

/// The status of a response message of `size` bytes, over the decoding
/// limit of `limit` bytes.
pub(super) fn too_large(size: usize, limit: usize) -> Status {
    Status::resource_exhausted(format!(
        "the response message is larger than the limit: found {size} bytes, the limit is: {limit} bytes"
    ))
}

/// The status of a unary response whose frames, `len` bytes so far,
/// are longer than one message of `limit` bytes and its head: a server
/// that went on sending after its one message.
pub(super) fn too_long(len: usize, limit: usize) -> Status {
    Status::resource_exhausted(format!(
        "the response is larger than the limit: found {len} bytes of frames for a unary call's one message, the limit is: {limit} bytes"
    ))
}

pin_project_lite::pin_project! {
    /// A response body whose gRPC frames are checked as they arrive: the
    /// head of an uncompressed message over `limit` bytes is not handed
    /// on (the bytes before it, the messages before it, are), and the body
    /// fails with [`too_large`] (and ends) instead, as tonic's decoder
    /// fails there. A compressed frame is left to the decoder, which
    /// refuses it first (humus's tonic has no compression).
    pub(super) struct Limited<B> {
        #[pin]
        body: B,
        limit: usize,
        frames: Frames,
        // The size of a message over the limit whose head is next: the
        // body's error at the next poll.
        over: Option<usize>,
        failed: bool,
    }
}

impl<B> Limited<B> {
    /// `body`, checked against `limit` bytes per message.
    pub(super) fn new(body: B, limit: usize) -> Limited<B> {
        Limited {
            body,
            limit,
            frames: Frames::default(),
            over: None,
            failed: false,
        }
    }
}

/// Where a body's gRPC frames stand as its chunks are read: how much of
/// the current frame's head has been read, and how much of its message is
/// still to come.
#[derive(Debug, Default)]
pub(super) struct Frames {
    head: [u8; FRAME_HEAD],
    have: usize,
    left: usize,
}

impl Frames {
    /// Reads `chunk` on from `*at` to the end of the next frame head it
    /// completes, if any: that head, and where in `chunk` it starts (0 if
    /// it started in an earlier chunk); `*at` is then just after it.
    /// `None` when the rest of `chunk` completes no head (`*at` is then
    /// its end).
    pub(super) fn next_head(
        &mut self,
        chunk: &[u8],
        at: &mut usize,
    ) -> Option<([u8; FRAME_HEAD], usize)> {
        while *at < chunk.len() {
            if self.left > 0 {
                let n = self.left.min(chunk.len() - *at);
                self.left -= n;
                *at += n;
                continue;
            }
            let starts = at.saturating_sub(self.have);
            let n = (FRAME_HEAD - self.have).min(chunk.len() - *at);
            self.head[self.have..self.have + n].copy_from_slice(&chunk[*at..*at + n]);
            self.have += n;
            *at += n;
            if self.have == FRAME_HEAD {
                self.have = 0;
                self.left = message_len(&self.head);
                return Some((self.head, starts));
            }
        }
        None
    }

    /// Whether the bytes read end within a frame (its head or its
    /// message).
    pub(super) fn is_mid_frame(&self) -> bool {
        self.have > 0 || self.left > 0
    }
}

/// Reads `chunk` on from where `frames` stand: the size of the first
/// message over `limit` whose head it completes, if any, and where in
/// `chunk` that head starts (0 if it started in an earlier chunk).
fn scan(chunk: &[u8], limit: usize, frames: &mut Frames) -> Option<(usize, usize)> {
    let mut at = 0;
    while let Some((head, starts)) = frames.next_head(chunk, &mut at) {
        let size = message_len(&head);
        if head[0] == 0 && size > limit {
            return Some((size, starts));
        }
    }
    None
}

impl<B> Body for Limited<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        if *this.failed {
            return Poll::Ready(None);
        }
        if let Some(size) = this.over.take() {
            *this.failed = true;
            return Poll::Ready(Some(Err(Box::new(too_large(size, *this.limit)))));
        }
        let frame = match std::task::ready!(this.body.poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(err)) => return Poll::Ready(Some(Err(err.into()))),
            None => return Poll::Ready(None),
        };
        if let Some(data) = frame.data_ref()
            && let Some((size, starts)) = scan(data, *this.limit, this.frames)
        {
            if starts == 0 {
                *this.failed = true;
                return Poll::Ready(Some(Err(Box::new(too_large(size, *this.limit)))));
            }
            // The messages before it first, as tonic's decoder reads them.
            *this.over = Some(size);
            return Poll::Ready(Some(Ok(Frame::data(data.slice(..starts)))));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        if self.failed {
            return http_body::SizeHint::with_exact(0);
        }
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(chunks: &[&[u8]], limit: usize) -> Vec<Option<(usize, usize)>> {
        let mut frames = Frames::default();
        chunks.iter().map(|c| scan(c, limit, &mut frames)).collect()
    }

    #[test]
    fn a_head_over_the_limit_is_found_however_the_frames_are_cut() {
        // Two messages of 3 bytes, then one of 9: over a limit of 8.
        let frames: Vec<u8> = [
            &[0, 0, 0, 0, 3, 1, 2, 3][..],
            &[0, 0, 0, 0, 3, 4, 5, 6],
            &[0, 0, 0, 0, 9],
        ]
        .concat();
        assert_eq!(scanned(&[&frames], 8), [Some((9, 16))]);
        assert_eq!(scanned(&[&frames], 9), [None]);
        let cut: Vec<&[u8]> = frames.chunks(1).collect();
        let found = scanned(&cut, 8);
        assert_eq!(found.last(), Some(&Some((9, 0))));
        assert!(found[..found.len() - 1].iter().all(Option::is_none));
        // A head cut in two: it starts where its first part does.
        assert_eq!(
            scanned(&[&frames[..18], &frames[18..]], 8),
            [None, Some((9, 0))]
        );
        assert_eq!(
            scanned(&[&frames[..7], &frames[7..]], 8),
            [None, Some((9, 9))]
        );
        // A compressed frame's length is the decoder's to judge.
        assert_eq!(scanned(&[&[1, 0, 0, 0, 9]], 8), [None]);
    }
}
