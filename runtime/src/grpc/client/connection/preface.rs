//! The HTTP/2 preface gate: the dialled IO, which tells the dial whether
//! the server's first frame is HTTP/2 settings, and fails every read and
//! write once the connection is closed.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
use tokio::sync::oneshot;

use super::dial::Dialer;
use crate::setup::BoxIo;

/// One dialled connection, which fails every read and write once
/// the client's connection is closed: hyper's connection task then ends,
/// and with it every call and stream in flight on it, woken by h2 as for
/// any broken connection. So a call pays nothing to be ended by
/// [`Connection::close`](super::Connection::close): no waiter of its own, just the flag it reads
/// when woken.
pub(super) struct Gated {
    pub(super) io: BoxIo,
    pub(super) dialer: Arc<Dialer>,
    /// The task that last found the IO not ready, woken at the close.
    pub(super) task: Arc<AtomicWaker>,
    /// Until the server's first 9 bytes are read: what they are so far.
    pub(super) preface: Option<Preface>,
}

/// The error of a dial whose server's first bytes, `first` (up to 9; none
/// if it closed first), are no HTTP/2 settings frame, saying what they
/// tell: an HTTP/1 answer (`HTTP/1.1 502 Bad Gateway` from a proxy not
/// set up for gRPC), a TLS record (a TLS server, to a plain-text client),
/// or neither.
pub(super) fn not_http2(addr: &str, first: &[u8], plain_text: bool) -> io::Error {
    const TLS_HINT: &str = "the server probably speaks TLS: set Settings::tls to a TLS config that trusts its certificate";
    // A TLS record's head: an alert (21) or a handshake (22), version 3.x.
    let tls_record = first.len() >= 2 && matches!(first[0], 0x15 | 0x16) && first[1] == 0x03;
    let (kind, text) = if first.is_empty() {
        // Nothing to go by: a server failing or shedding connections, or,
        // in plain text, a TLS server that closes on bytes that are no
        // ClientHello.
        let hint = if plain_text {
            " (a server failing or refusing connections, or one that speaks TLS: then set Settings::tls to a TLS config that trusts its certificate)"
        } else {
            ""
        };
        (
            io::ErrorKind::ConnectionAborted,
            format!("dial {addr}: the connection closed before the server sent anything{hint}"),
        )
    } else if first.starts_with(b"HTTP/1.") {
        (
            io::ErrorKind::InvalidData,
            format!(
                "dial {addr}: the server answered in HTTP/1 (its first bytes are {:?}), not HTTP/2, which gRPC needs end to end: the likeliest cause is a proxy or server that is not set up for gRPC (HTTP/2{})",
                String::from_utf8_lossy(first),
                if plain_text {
                    " in plain text, h2c), or a TLS port answering a plain-text request (as nginx does, with a 400: then set Settings::tls"
                } else {
                    ""
                }
            ),
        )
    } else if tls_record && plain_text {
        (
            io::ErrorKind::InvalidData,
            format!(
                "dial {addr}: the server does not speak HTTP/2 in plain text (its first bytes are a TLS record, {first:02x?}): {TLS_HINT}"
            ),
        )
    } else {
        (
            io::ErrorKind::InvalidData,
            format!(
                "dial {addr}: the server does not speak HTTP/2 (its first bytes, {}, are no settings frame)",
                shown(first)
            ),
        )
    };
    io::Error::new(kind, text)
}

/// `bytes` as a reader tells them best: quoted text when they are
/// printable ASCII (with tabs and line ends, escaped), such as
/// `"<!DOCTYPE"`; else hex, `[15, 03, 03]`.
fn shown(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text)
            if bytes
                .iter()
                .all(|b| b.is_ascii_graphic() || matches!(b, b' ' | b'\t' | b'\r' | b'\n')) =>
        {
            format!("{text:?}")
        }
        _ => format!("{bytes:02x?}"),
    }
}

/// What a server's first bytes were: an HTTP/2 settings frame's head, or
/// other bytes (fewer than 9 if the connection ended first).
#[derive(Debug)]
pub(super) enum Heard {
    Settings,
    Other { head: [u8; 9], len: usize },
}

/// The head of the first frame a server sends, which HTTP/2 requires to be
/// a SETTINGS frame that is not an acknowledgement (RFC 9113, 3.4): 9
/// bytes, type 4, no ACK flag, stream 0.
pub(super) struct Preface {
    pub(super) head: [u8; 9],
    pub(super) len: usize,
    /// Told whether the head is a settings frame's, or what it is; told
    /// the bytes so far at the end of the stream; dropped unsent if the
    /// connection fails first.
    pub(super) heard: oneshot::Sender<Heard>,
}

impl Preface {
    /// Takes in `read`, the bytes just read; `Some` once the head is whole.
    fn read(&mut self, read: &[u8]) -> Option<bool> {
        let n = read.len().min(self.head.len() - self.len);
        self.head[self.len..self.len + n].copy_from_slice(&read[..n]);
        self.len += n;
        (self.len == self.head.len())
            .then(|| self.head[3] == 4 && self.head[4] & 1 == 0 && self.head[5..] == [0; 4])
    }
}

impl Gated {
    /// `poll` of the IO, failed once the connection is closed. The waker
    /// of a poll that waits is kept for the close (read again after it is
    /// kept, so a close in between is not missed).
    fn gate<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut BoxIo>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if self.dialer.is_closed() {
            return Poll::Ready(Err(self.dialer.closed_error()));
        }
        let polled = poll(Pin::new(&mut self.io), cx);
        if polled.is_pending() {
            self.task.register(cx.waker());
            if self.dialer.is_closed() {
                return Poll::Ready(Err(self.dialer.closed_error()));
            }
        }
        polled
    }
}

impl tokio::io::AsyncRead for Gated {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = this.gate(cx, |io, cx| io.poll_read(cx, buf));
        if let Some(preface) = &mut this.preface
            && let Poll::Ready(Ok(())) = polled
        {
            let read = preface.read(&buf.filled()[before..]);
            let ended = read.is_none() && buf.filled().len() == before;
            if (read.is_some() || ended)
                && let Some(preface) = this.preface.take()
            {
                // The settings, other bytes, or the end of the stream
                // before the settings (with the bytes so far).
                let heard = match read {
                    Some(true) => Heard::Settings,
                    _ => Heard::Other {
                        head: preface.head,
                        len: preface.len,
                    },
                };
                let _ = preface.heard.send(heard);
            }
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Gated {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().gate(cx, |io, cx| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .gate(cx, |io, cx| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().gate(cx, |io, cx| io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A shutdown is the connection ending anyway: let it through.
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the first bytes of a server that is no HTTP/2 one tell.
    #[test]
    fn a_dial_that_hears_no_settings_says_what_it_heard() {
        let said = |first: &[u8], plain_text: bool| not_http2("a:1", first, plain_text).to_string();
        // A proxy's HTTP/1.1 answer; in plain text, perhaps a TLS port's.
        for plain_text in [true, false] {
            let text = said(b"HTTP/1.1 ", plain_text);
            assert!(text.starts_with("dial a:1: the server answered in HTTP/1 (its first bytes are \"HTTP/1.1 \"), not HTTP/2"), "{text}");
            assert!(text.contains("not set up for gRPC"), "{text}");
            assert_eq!(
                text.contains("a TLS port answering a plain-text request"),
                plain_text,
                "{text}"
            );
        }
        assert!(said(b"HTTP/1.0", true).contains("answered in HTTP/1"));
        // A TLS alert (and a handshake record) to a plain-text client.
        for record in [
            &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32][..],
            &[0x16, 0x03, 0x01, 0, 0, 0, 0, 0, 0],
        ] {
            let text = said(record, true);
            assert!(text.contains("its first bytes are a TLS record"), "{text}");
            assert!(text.ends_with("the server probably speaks TLS: set Settings::tls to a TLS config that trusts its certificate"), "{text}");
        }
        // Neither: said as text when printable ASCII, with no guess ...
        let text = said(b"SSH-2.0-x", true);
        assert_eq!(
            text,
            "dial a:1: the server does not speak HTTP/2 (its first bytes, \"SSH-2.0-x\", are no settings frame)"
        );
        let text = said(b"<!DOCTYPE", true);
        assert_eq!(
            text,
            "dial a:1: the server does not speak HTTP/2 (its first bytes, \"<!DOCTYPE\", are no settings frame)"
        );
        assert!(said(b"ok\r\n\"x\"\t", false).contains(r#"its first bytes, "ok\r\n\"x\"\t", are"#));
        // ... and as hex bytes when not.
        let text = said(&[0x00, 0x00, 0x04, 0x01, b'a', 0xff], true);
        assert!(
            text.contains("its first bytes, [00, 00, 04, 01, 61, ff], are"),
            "{text}"
        );
        assert!(said("é".as_bytes(), true).contains("[c3, a9]"));
        assert!(!said(&[0x15, 0x03], false).contains("TLS"));
        // Nothing read: a failing server, or, in plain text, a TLS one.
        assert_eq!(
            said(&[], true),
            "dial a:1: the connection closed before the server sent anything (a server failing or refusing connections, or one that speaks TLS: then set Settings::tls to a TLS config that trusts its certificate)"
        );
        assert_eq!(
            said(&[], false),
            "dial a:1: the connection closed before the server sent anything"
        );
    }

    #[test]
    fn the_servers_first_frame_must_be_settings_without_ack() {
        let read = |chunks: &[&[u8]]| {
            let (heard, _told) = oneshot::channel();
            let mut preface = Preface {
                head: [0; 9],
                len: 0,
                heard,
            };
            chunks.iter().map(|c| preface.read(c)).collect::<Vec<_>>()
        };
        // SETTINGS, 6 bytes long (one setting), flags 0, stream 0; in parts.
        let settings = [0, 0, 6, 4, 0, 0, 0, 0, 0];
        assert_eq!(read(&[&settings[..4], &settings[4..]]), [None, Some(true)]);
        assert_eq!(
            read(&[&[0, 0, 0, 4, 1, 0, 0, 0, 0]]),
            [Some(false)],
            "an ACK"
        );
        assert_eq!(read(&[b"HTTP/1.1 400"]), [Some(false)], "HTTP/1.1");
        assert_eq!(
            read(&[&[0, 0, 0, 4, 0, 0, 0, 0, 1]]),
            [Some(false)],
            "stream 1"
        );
    }
}
