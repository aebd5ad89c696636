//! The codecs of the client's calls: a request encoded once per call, and
//! prost for everything else.

use std::marker::PhantomData;

use bytes::{BufMut, Bytes};
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, EncodeBuf, Encoder};
use tonic_prost::ProstDecoder;

use super::limit::FRAME_HEAD;

/// A codec whose encoder writes a message already encoded (once per call,
/// however many attempts send it), and whose decoder is prost's.
pub(crate) struct PreEncoded<D> {
    /// The encoded message's length.
    len: usize,
    _decode: PhantomData<fn() -> D>,
}

impl<D> PreEncoded<D> {
    /// The codec of a send of a message encoded as `len` bytes.
    pub(crate) fn new(len: usize) -> Self {
        PreEncoded {
            len,
            _decode: PhantomData,
        }
    }
}

impl<D> Codec for PreEncoded<D>
where
    D: prost::Message + Default + Send + 'static,
{
    type Encode = Bytes;
    type Decode = D;
    type Encoder = BytesEncoder;
    type Decoder = ProstDecoder<D>;

    fn encoder(&mut self) -> Self::Encoder {
        BytesEncoder { len: self.len }
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::default()
    }
}

/// Writes pre-encoded message bytes as they are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BytesEncoder {
    /// The length of the one message it writes.
    len: usize,
}

/// tonic's default encoder buffer (`tonic::codec::BufferSettings`).
const TONIC_BUFFER: usize = 8 * 1024;

/// tonic's default yield threshold (`tonic::codec::BufferSettings`):
/// with one message to send, never reached before the message's end.
const YIELD_THRESHOLD: usize = 32 * 1024;

impl Encoder for BytesEncoder {
    type Item = Bytes;
    type Error = Status;

    /// tonic's buffer: 8 KiB, or the one frame's size if larger. tonic's
    /// body writes the frame into it and sends a slice of it, which h2
    /// frees once written, on the connection's task.
    ///
    /// Not a buffer of the frame's size, which would allocate less: each
    /// call in flight then has no 8 KiB block, where tonic's has one from
    /// the call's start to the write, and glibc's malloc (two tokio
    /// workers, an arena each) then gives the top of an arena back to the
    /// system at the end of a batch of concurrent calls and faults it in
    /// again at the next: in `benches/overhead_interleaved.rs`'s profile
    /// mode (64,000 calls, 64 at once) 9,500-12,400 page faults and ~100
    /// `madvise` per 6,400 calls, against tonic's ~900 and ~15, and the
    /// same ~900 and ~20 with this buffer.
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new((FRAME_HEAD + self.len).max(TONIC_BUFFER), YIELD_THRESHOLD)
    }

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.reserve(item.len());
        dst.put_slice(&item);
        Ok(())
    }
}

/// Encodes `message` once, for every attempt of a call to send.
pub(crate) fn encode_once<M: prost::Message>(message: &M) -> Bytes {
    Bytes::from(message.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, PartialEq, prost::Message)]
    struct Cart {
        #[prost(string, tag = "1")]
        id: String,
        #[prost(uint32, tag = "2")]
        items: u32,
    }

    #[test]
    fn pre_encoded_bytes_decode_as_the_message() {
        let cart = Cart {
            id: "c-1".into(),
            items: 3,
        };
        let bytes = encode_once(&cart);
        assert_eq!(<Cart as prost::Message>::decode(bytes).unwrap(), cart);
    }
}
