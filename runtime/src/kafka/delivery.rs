//! What a produce call ends with: each record's [`Delivery`] or
//! [`RecordResult`], the call's [`Error`] and its [`Kind`], and the
//! [`Classify`] function that judges them for the breaker and the retry.

use std::borrow::Cow;
use std::fmt;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::call::Classification;
use crate::circuit::Outcome;
use crate::fault::InjectedError;
use crate::telemetry::names::HTTP_REJECTED_ERROR_TYPE;

/// The `error.type` of a record the producer's call ended unsent because
/// the producer was stopped, and of a record the consumer's stop dropped.
use super::consumer::STOPPED_ERROR_TYPE;

/// Where a record was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Its partition.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
}

/// What became of one record of a call that failed ([`Error::records`]).
#[derive(Clone, Debug)]
pub enum RecordResult {
    /// The record was stored (another of the call's failed).
    Stored(Delivery),
    /// librdkafka failed it: not stored in time, refused by the broker or
    /// by librdkafka itself (a record over `message.max.bytes`).
    Failed(KafkaError),
    /// It was never handed to librdkafka: the breaker rejected the call,
    /// failure injection aborted it, or the producer is closed.
    Unsent,
    /// librdkafka had not reported on it when the call's deadline ended the
    /// call (the deadline inherited from the RPC being served, earlier than
    /// `delivery_timeout`): librdkafka still holds it, and may yet store it
    /// within `delivery_timeout`.
    InFlight,
}

/// What kind of failure ended a [`Producer::produce`](super::Producer::produce) call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// The breaker rejected the call: nothing was sent.
    Rejected,
    /// A record was not stored within the call's deadline:
    /// `delivery_timeout`, or the deadline inherited from the RPC being
    /// served when earlier (an injected delay that reached it too).
    Timeout,
    /// The cluster failed a record (a broker that cannot be reached, its
    /// transport errors), or failure injection aborted the call.
    Transport,
    /// The caller's own: a record over the size limit, an unknown or
    /// unauthorised topic. It does not count against the cluster.
    Record,
    /// The producer is closed ([`Producer::close`](super::Producer::close),
    /// the App's stop): nothing was sent.
    Stopped,
}

/// Why a [`Producer::produce`](super::Producer::produce) call failed: its [`Kind`], what became of
/// each record ([`records`](Error::records)), and the librdkafka or
/// injected error underneath.
#[derive(Clone, Debug)]
pub struct Error {
    kind: Kind,
    message: String,
    pub(super) injected: Option<InjectedError>,
    kafka: Option<KafkaError>,
    pub(super) records: Vec<RecordResult>,
}

impl Error {
    pub(super) fn new(kind: Kind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            injected: None,
            kafka: None,
            records: Vec::new(),
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The injected fault that ended the call, if failure injection did.
    pub fn injected(&self) -> Option<&InjectedError> {
        self.injected.as_ref()
    }

    /// librdkafka's error of the first record it failed, if it failed one.
    pub fn kafka(&self) -> Option<&KafkaError> {
        self.kafka.as_ref()
    }

    /// What became of each record, in the order given. A call its
    /// deadline ended says which records were stored by then, which
    /// librdkafka failed, and which were still
    /// [`InFlight`](RecordResult::InFlight) (librdkafka may yet store
    /// them).
    pub fn records(&self) -> &[RecordResult] {
        &self.records
    }

    /// The `error.type` this error is recorded with:
    /// [`fault::ERROR_TYPE`](crate::fault::ERROR_TYPE) for every failure
    /// failure injection caused, `humus::circuit::Rejected` for a
    /// rejection, [`STOPPED_ERROR_TYPE`] for a stopped producer,
    /// librdkafka's error code (`MessageTimedOut`, `MessageSizeTooLarge`)
    /// when it failed a record, else `timeout`.
    pub fn error_type(&self) -> Cow<'static, str> {
        if self.injected.is_some() {
            return Cow::Borrowed(InjectedError::ERROR_TYPE);
        }
        match (self.kind, &self.kafka) {
            (Kind::Rejected, _) => Cow::Borrowed(HTTP_REJECTED_ERROR_TYPE),
            (Kind::Stopped, _) => Cow::Borrowed(STOPPED_ERROR_TYPE),
            (_, Some(e)) => kafka_error_type(e),
            (_, None) => Cow::Borrowed("timeout"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            Kind::Rejected => "rejected by the circuit breaker",
            Kind::Timeout => "not stored in time",
            Kind::Transport => "failed",
            Kind::Record => "refused",
            Kind::Stopped => "stopped",
        };
        write!(f, "kafka produce {what}: {}", self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match (&self.injected, &self.kafka) {
            (Some(injected), _) => Some(injected),
            (None, Some(kafka)) => Some(kafka),
            (None, None) => None,
        }
    }
}

/// librdkafka's error code of `e` as an `error.type` (`MessageTimedOut`).
pub(super) fn kafka_error_type(e: &KafkaError) -> Cow<'static, str> {
    match e.rdkafka_error_code() {
        Some(code) => Cow::Owned(format!("{code:?}")),
        None => Cow::Borrowed("_OTHER"),
    }
}

/// Whether librdkafka's `code` is the caller's own doing: a record over
/// the size limit, an unknown, invalid or unauthorised topic.
fn is_callers(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::UnknownTopicOrPartition
            | RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::UnknownPartition
            | RDKafkaErrorCode::InvalidTopic
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
    )
}

/// Whether librdkafka's `code` says a record was not stored in time.
fn is_timeout(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageTimedOut | RDKafkaErrorCode::RequestTimedOut
    )
}

/// What a produce call ended with, as a classify function sees it: where
/// each record was stored, or the error.
pub type CallResult<'a> = Result<&'a [Delivery], &'a Error>;

crate::call::classify_fn! {
    /// The producer's classify function, as
    /// [`ProducerSettings::classify`](super::ProducerSettings::classify)
    /// holds it: a cheaply cloned wrapper of any closure of the call's
    /// result. [`Classify::default`] is [`default_classify`].
    ///
    /// It is asked about every call that reached librdkafka (or that failure
    /// injection ended); the producer retries nothing whatever it answers
    /// (librdkafka's idempotent retries within `delivery_timeout` are the
    /// only ones), so only its [`breaker`](Classification::breaker) counts.
    /// A call whose `delivery_timeout` passed is a Failure without asking.
    ///
    /// ```
    /// use humus::circuit::Outcome;
    /// use humus::grpc::client::Classification;
    /// use humus::kafka::Classify;
    ///
    /// // Spare the breaker when failure injection ended a call.
    /// let classify = Classify::new(|result| match result {
    ///     Err(e) if e.injected().is_some() => Classification::stop(Outcome::Ignored),
    ///     result => humus::kafka::default_classify(result),
    /// });
    /// # let _ = classify;
    /// ```
    pub struct Classify;
    /// Classifies a call that ended with `result`.
    pub fn classify(&self, result: CallResult<'_>);
    default default_classify;
}

/// The default classification of a produce call, for the breaker: every
/// record stored is a Success; the caller's own error
/// ([`Kind::Record`]: a record over the size limit, an unknown or
/// unauthorised topic) is Ignored; anything else (a record not stored in
/// time, a broker that cannot be reached, its transport errors, an
/// injected fault) is a Failure. Never a retry.
pub fn default_classify(result: CallResult<'_>) -> Classification {
    Classification::stop(match result {
        Ok(_) => Outcome::Success,
        Err(e) if e.kind() == Kind::Record => Outcome::Ignored,
        Err(_) => Outcome::Failure,
    })
}

/// The error of a call some of whose records librdkafka failed: its kind
/// the worst of theirs (the cluster's failure wins over the caller's).
pub(super) fn failed(results: Vec<Result<Delivery, KafkaError>>) -> Error {
    let mut records = Vec::with_capacity(results.len());
    let mut first: Option<KafkaError> = None;
    let mut kind = Kind::Record;
    for result in results {
        match result {
            Ok(d) => records.push(RecordResult::Stored(d)),
            Err(e) => {
                let this = match e.rdkafka_error_code() {
                    Some(code) if is_timeout(code) => Kind::Timeout,
                    Some(code) if is_callers(code) => Kind::Record,
                    _ => Kind::Transport,
                };
                if first.is_none() || kind == Kind::Record {
                    kind = this;
                }
                first.get_or_insert_with(|| e.clone());
                records.push(RecordResult::Failed(e));
            }
        }
    }
    let failed = records
        .iter()
        .filter(|r| matches!(r, RecordResult::Failed(_)))
        .count();
    let message = match &first {
        Some(e) => format!("{failed} of {} records: {e}", records.len()),
        None => "no record failed".to_owned(),
    };
    Error {
        kind,
        message,
        injected: None,
        kafka: first,
        records,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The caller's errors do not count against the cluster; the
    /// cluster's and the injected ones do.
    #[test]
    fn the_default_classify_spares_the_breaker_the_callers_errors() {
        let failed = |kind| Error::new(kind, "x");
        assert_eq!(default_classify(Ok(&[])).breaker, Outcome::Success);
        assert_eq!(
            default_classify(Err(&failed(Kind::Record))).breaker,
            Outcome::Ignored
        );
        for kind in [Kind::Timeout, Kind::Transport] {
            assert_eq!(
                default_classify(Err(&failed(kind))).breaker,
                Outcome::Failure
            );
        }
        assert!(is_callers(RDKafkaErrorCode::MessageSizeTooLarge));
        assert!(!is_callers(RDKafkaErrorCode::MessageTimedOut));
        assert!(is_timeout(RDKafkaErrorCode::MessageTimedOut));
    }
}
