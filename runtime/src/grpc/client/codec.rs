//! The codecs of the client's calls: a request encoded once per call, and
//! prost for everything else.

use std::marker::PhantomData;

use bytes::{BufMut, Bytes};
use tonic::Status;
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic_prost::ProstDecoder;

/// A codec whose encoder writes a message already encoded (once per call,
/// however many attempts send it), and whose decoder is prost's.
pub(crate) struct PreEncoded<D> {
    _decode: PhantomData<fn() -> D>,
}

impl<D> PreEncoded<D> {
    pub(crate) fn new() -> Self {
        PreEncoded {
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
        BytesEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::default()
    }
}

/// Writes pre-encoded message bytes as they are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BytesEncoder;

impl Encoder for BytesEncoder {
    type Item = Bytes;
    type Error = Status;

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
