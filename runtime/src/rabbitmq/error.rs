//! `PublishError`: why a publish did not end confirmed.

use std::fmt;
use std::sync::Arc;

use crate::fault::InjectedError;

/// What kind of failure ended a publish (its last attempt's), as the
/// [default classification](super::default_classify) reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PublishErrorKind {
    /// The publisher could not connect (or is waiting out the connection
    /// backoff), or its connection or channel was lost before the confirm
    /// came. An injected abort is marked as this kind too: nothing was
    /// sent, as when the connection is gone.
    Connection,
    /// The broker refused the message (`basic.nack`).
    Nacked,
    /// The broker returned the message: no queue is bound for its
    /// routing key (every publish is `mandatory`). The caller's to fix;
    /// it counts nothing against the broker.
    Unroutable,
    /// The broker closed the channel over the publish with a reply code
    /// of the caller's making (`403 ACCESS_REFUSED`, `404 NOT_FOUND`: an
    /// exchange that does not exist, `406 PRECONDITION_FAILED`). It counts
    /// nothing against the broker.
    Refused,
    /// The attempt's own timeout ([`attempt_timeout`](super::PublisherSettings::attempt_timeout))
    /// passed before the confirm.
    AttemptTimeout,
    /// The call's deadline passed before a confirm (the publisher's
    /// [`timeout`](super::PublisherSettings::timeout), or the deadline of
    /// the RPC being served).
    Timeout,
    /// The circuit breaker rejected the attempt: nothing was sent.
    Rejected,
    /// The publisher was closed (the App stopped): nothing more is sent.
    Closed,
}

impl PublishErrorKind {
    /// The `error.type` a span or a data point records for it.
    pub(crate) fn error_type(self) -> &'static str {
        match self {
            PublishErrorKind::Connection => "connection",
            PublishErrorKind::Nacked => "nacked",
            PublishErrorKind::Unroutable => "unroutable",
            PublishErrorKind::Refused => "refused",
            PublishErrorKind::AttemptTimeout => "attempt_timeout",
            PublishErrorKind::Timeout => "timeout",
            PublishErrorKind::Rejected => crate::telemetry::names::HTTP_REJECTED_ERROR_TYPE,
            PublishErrorKind::Closed => "closed",
        }
    }
}

/// Why a [`publish`](super::Publisher::publish) did not end confirmed: its
/// [`kind`](PublishError::kind), and a message naming the destination,
/// `rabbitmq: publishing to orders:accepted: the broker nacked the message`.
#[derive(Clone)]
pub struct PublishError {
    kind: PublishErrorKind,
    destination: Arc<str>,
    detail: String,
    injected: Option<InjectedError>,
    reply_code: Option<u16>,
}

impl PublishError {
    pub(crate) fn new(
        kind: PublishErrorKind,
        destination: &Arc<str>,
        detail: impl Into<String>,
    ) -> PublishError {
        PublishError {
            kind,
            destination: Arc::clone(destination),
            detail: detail.into(),
            injected: None,
            reply_code: None,
        }
    }

    pub(crate) fn with_injected(mut self, injected: InjectedError) -> PublishError {
        self.injected = Some(injected);
        self
    }

    pub(crate) fn with_reply_code(mut self, code: u16) -> PublishError {
        self.reply_code = Some(code);
        self
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> PublishErrorKind {
        self.kind
    }

    /// The injected failure that ended the attempt, if failure injection
    /// did (an abort is of kind [`Connection`](PublishErrorKind::Connection)).
    pub fn injected(&self) -> Option<&InjectedError> {
        self.injected.as_ref()
    }

    /// The broker's reply code of a return or a channel's close
    /// (`312 NO_ROUTE`, `404 NOT_FOUND`), when it gave one.
    pub fn reply_code(&self) -> Option<u16> {
        self.reply_code
    }

    /// The `error.type` a span or a data point records: one value for every
    /// injected failure, [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE).
    pub(crate) fn error_type(&self) -> &'static str {
        match &self.injected {
            Some(injected) => injected.error_type(),
            None => self.kind.error_type(),
        }
    }
}

impl fmt::Display for PublishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rabbitmq: publishing to {}: {}",
            self.destination, self.detail
        )
    }
}

impl fmt::Debug for PublishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublishError")
            .field("kind", &self.kind)
            .field("message", &self.to_string())
            .finish_non_exhaustive()
    }
}

impl std::error::Error for PublishError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.injected
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
