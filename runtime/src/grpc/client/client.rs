//! The `Client`: one dependency, one connection, one budget, one breaker.
//!
//! PLACEHOLDER: the attempt loop lands with issue 4. Every call fails
//! `Unimplemented` until then.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;

use super::{Method, Settings};
use crate::Setup;

/// A resilient gRPC client of one dependency.
#[derive(Clone, Debug)]
pub struct Client {
    _settings: std::sync::Arc<Settings>,
}

/// Why [`Client::new`] refused its settings.
#[derive(Debug, thiserror::Error)]
#[error("invalid client settings")]
pub struct NewError {
    _private: (),
}

fn not_yet() -> tonic::Status {
    tonic::Status::unimplemented("humus client: not implemented yet")
}

impl Client {
    /// Builds a client of the dependency `settings` names.
    ///
    /// # Errors
    ///
    /// [`NewError`] when a setting is invalid.
    pub fn new(setup: &Setup, settings: Settings) -> Result<Client, NewError> {
        let _ = setup;
        Ok(Client {
            _settings: std::sync::Arc::new(settings),
        })
    }

    /// Makes a unary call of `method`.
    ///
    /// # Errors
    ///
    /// The last attempt's status.
    pub async fn unary<Req, Resp>(
        &self,
        method: &'static Method,
        request: tonic::Request<Req>,
    ) -> Result<tonic::Response<Resp>, tonic::Status>
    where
        Req: prost::Message + Send + 'static,
        Resp: prost::Message + Default + Send + 'static,
    {
        let _ = (method, request);
        Err(not_yet())
    }

    /// Opens a server-streaming call of `method`.
    ///
    /// # Errors
    ///
    /// The status of the last attempt to open the stream.
    pub async fn server_streaming<Req, Resp>(
        &self,
        method: &'static Method,
        request: tonic::Request<Req>,
    ) -> Result<tonic::Response<Streaming<Resp>>, tonic::Status>
    where
        Req: prost::Message + Send + 'static,
        Resp: prost::Message + Default + Send + 'static,
    {
        let _ = (method, request);
        Err(not_yet())
    }

    /// Makes a client-streaming call of `method`.
    ///
    /// # Errors
    ///
    /// The call's status.
    pub async fn client_streaming<S, Req, Resp>(
        &self,
        method: &'static Method,
        request: tonic::Request<S>,
    ) -> Result<tonic::Response<Resp>, tonic::Status>
    where
        S: Stream<Item = Req> + Send + 'static,
        Req: prost::Message + Send + 'static,
        Resp: prost::Message + Default + Send + 'static,
    {
        let _ = (method, request);
        Err(not_yet())
    }

    /// Opens a bidirectional-streaming call of `method`.
    ///
    /// # Errors
    ///
    /// The status of the last attempt to open the stream.
    pub async fn streaming<S, Req, Resp>(
        &self,
        method: &'static Method,
        request: tonic::Request<S>,
    ) -> Result<tonic::Response<Streaming<Resp>>, tonic::Status>
    where
        S: Stream<Item = Req> + Send + 'static,
        Req: prost::Message + Send + 'static,
        Resp: prost::Message + Default + Send + 'static,
    {
        let _ = (method, request);
        Err(not_yet())
    }
}

/// A stream of responses that counts in the breaker once, when it ends.
#[derive(Debug)]
pub struct Streaming<T> {
    inner: tonic::Streaming<T>,
}

impl<T> Streaming<T> {
    /// The next message, `None` at the end of the stream.
    ///
    /// # Errors
    ///
    /// The status the stream ended with.
    pub async fn message(&mut self) -> Result<Option<T>, tonic::Status> {
        self.inner.message().await
    }
}

impl<T> Stream for Streaming<T> {
    type Item = Result<T, tonic::Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}
