//! The attempt loop (seed 000, "Which calls are retried", "How an
//! attempt's result counts", "Streams").

use http::uri::PathAndQuery;
use tokio::time::Instant;
use tonic::Status;

use super::Method;
use super::client::{Inner, deadline};
use super::codec::{PreEncoded, encode_once};
use super::connection::{closing, never_processed};

/// How many times one attempt is sent again, at once, when its request
/// never reached the server (gRPC's transparent retry).
const TRANSPARENT_RETRIES: usize = 3;

fn deadline_exceeded() -> Status {
    Status::deadline_exceeded("the call's deadline passed")
}

pub(super) async fn unary<Req, Resp>(
    inner: &Inner,
    method: &'static Method,
    request: tonic::Request<Req>,
) -> Result<tonic::Response<Resp>, Status>
where
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    let start = Instant::now();
    let deadline = deadline(start, Some(inner.settings.timeout), request.metadata())
        .expect("a unary call always has a deadline");
    let (mut metadata, _extensions, message) = request.into_parts();
    metadata.remove("grpc-timeout");
    let body = encode_once(&message);
    drop(message);
    if inner.conn.is_closed() {
        return Err(closing());
    }
    let path = PathAndQuery::from_static(method.full_name);
    let attempt = async {
        let channel = inner.conn.channel()?;
        let mut grpc = tonic::client::Grpc::new(channel);
        let mut resent = 0;
        loop {
            let mut request = tonic::Request::from_parts(
                metadata.clone(),
                tonic::Extensions::default(),
                body.clone(),
            );
            request.set_timeout(deadline.saturating_duration_since(Instant::now()));
            grpc.ready()
                .await
                .map_err(|e| Status::unavailable(format!("the connection is not ready: {e}")))?;
            match grpc
                .unary(request, path.clone(), PreEncoded::<Resp>::new())
                .await
            {
                Err(status) if resent < TRANSPARENT_RETRIES && never_processed(&status) => {
                    resent += 1;
                }
                result => return result,
            }
        }
    };
    tokio::select! {
        () = inner.conn.closed() => Err(closing()),
        result = tokio::time::timeout_at(deadline, attempt) => match result {
            Ok(Err(_)) if Instant::now() >= deadline => Err(deadline_exceeded()),
            Ok(result) => result,
            Err(_) => Err(deadline_exceeded()),
        },
    }
}
