//! The methods a [`Channel`](super::Channel) knows without being told: the
//! well-known services (`grpc.health.v1`, `grpc.reflection.v1` and
//! `v1alpha`), and those of an encoded `google.protobuf.FileDescriptorSet`
//! ([`Methods::from_file_descriptor_set`]), each with its kind and the
//! `humus.v1.policy` option its `.proto` declares, if any.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use tonic::Code;

use super::channel::{DuplicateMethod, Methods};
use super::{CodeRule, Method, MethodPolicy, RpcKind};
use crate::{circuit, retry};

/// What protobuf's `descriptor.proto` says of a file set, as far as the
/// channel reads it (prost skips every other field): each file's package,
/// its services, their methods' names, streaming flags and options.
mod proto {
    /// `google.protobuf.FileDescriptorSet`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct FileDescriptorSet {
        #[prost(message, repeated, tag = "1")]
        pub(super) file: Vec<FileDescriptorProto>,
    }

    /// `google.protobuf.FileDescriptorProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct FileDescriptorProto {
        #[prost(string, optional, tag = "1")]
        pub(super) name: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub(super) package: Option<String>,
        #[prost(message, repeated, tag = "6")]
        pub(super) service: Vec<ServiceDescriptorProto>,
    }

    /// `google.protobuf.ServiceDescriptorProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ServiceDescriptorProto {
        #[prost(string, optional, tag = "1")]
        pub(super) name: Option<String>,
        #[prost(message, repeated, tag = "2")]
        pub(super) method: Vec<MethodDescriptorProto>,
    }

    /// `google.protobuf.MethodDescriptorProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct MethodDescriptorProto {
        #[prost(string, optional, tag = "1")]
        pub(super) name: Option<String>,
        #[prost(message, optional, tag = "4")]
        pub(super) options: Option<MethodOptions>,
        #[prost(bool, optional, tag = "5")]
        pub(super) client_streaming: Option<bool>,
        #[prost(bool, optional, tag = "6")]
        pub(super) server_streaming: Option<bool>,
    }

    /// `google.protobuf.MethodOptions`, with humus's extension
    /// (`humus.v1.policy`, field 51917 of humus-build's
    /// `humus/v1/options.proto`), which a descriptor set encoded with its
    /// extension options carries (humus-build's
    /// `file_descriptor_set_path`, protoc's `--descriptor_set_out`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct MethodOptions {
        #[prost(message, optional, tag = "51917")]
        pub(super) policy: Option<MethodPolicy>,
    }

    /// `humus.v1.MethodPolicy`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct MethodPolicy {
        #[prost(bool, tag = "1")]
        pub(super) never_retry: bool,
        #[prost(message, repeated, tag = "2")]
        pub(super) classify: Vec<CodeRule>,
    }

    /// `humus.v1.CodeRule`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct CodeRule {
        #[prost(string, tag = "1")]
        pub(super) code: String,
        #[prost(string, tag = "2")]
        pub(super) retry: String,
        #[prost(string, tag = "3")]
        pub(super) breaker: String,
    }
}

/// Why [`Methods::from_file_descriptor_set`] refused its bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DescriptorSetError {
    /// The bytes do not decode as a `google.protobuf.FileDescriptorSet`
    /// (prost's error, which names the field it was reading).
    #[error(
        "Methods::from_file_descriptor_set: the bytes are not an encoded google.protobuf.FileDescriptorSet: {0}"
    )]
    Decode(String),
    /// The set has no file: not a descriptor set (empty bytes decode as
    /// one with nothing in it).
    #[error(
        "Methods::from_file_descriptor_set: the descriptor set has no file; give the bytes of an encoded google.protobuf.FileDescriptorSet (tonic-health's pb::FILE_DESCRIPTOR_SET, a build's file_descriptor_set_path)"
    )]
    Empty,
    /// A service or method with no name, in `file`.
    #[error("Methods::from_file_descriptor_set: {file}: a {what} has no name")]
    Unnamed {
        /// The file's name in the set (`ledger/v1/ledger.proto`).
        file: String,
        /// `service` or `method`.
        what: &'static str,
    },
    /// A method's `humus.v1.policy` option is not one humus-build would
    /// have accepted.
    #[error("Methods::from_file_descriptor_set: {file}: {path}: humus.v1.policy: {problem}")]
    Policy {
        /// The file's name in the set.
        file: String,
        /// The method's path, `/package.Service/Method`.
        path: String,
        /// What is wrong, and what to do.
        problem: String,
    },
    /// Two different descriptors of one method: the set, or the sets
    /// joined ([`Methods::join`]), declare one path twice with a
    /// different kind or policy.
    #[error(transparent)]
    Duplicate(#[from] DuplicateMethod),
}

/// The gRPC status codes by their canonical names.
const CODES: [(&str, Code); 17] = [
    ("OK", Code::Ok),
    ("CANCELLED", Code::Cancelled),
    ("UNKNOWN", Code::Unknown),
    ("INVALID_ARGUMENT", Code::InvalidArgument),
    ("DEADLINE_EXCEEDED", Code::DeadlineExceeded),
    ("NOT_FOUND", Code::NotFound),
    ("ALREADY_EXISTS", Code::AlreadyExists),
    ("PERMISSION_DENIED", Code::PermissionDenied),
    ("RESOURCE_EXHAUSTED", Code::ResourceExhausted),
    ("FAILED_PRECONDITION", Code::FailedPrecondition),
    ("ABORTED", Code::Aborted),
    ("OUT_OF_RANGE", Code::OutOfRange),
    ("UNIMPLEMENTED", Code::Unimplemented),
    ("INTERNAL", Code::Internal),
    ("UNAVAILABLE", Code::Unavailable),
    ("DATA_LOSS", Code::DataLoss),
    ("UNAUTHENTICATED", Code::Unauthenticated),
];

const VERDICTS: [(&str, retry::Verdict); 3] = [
    ("SUCCESS", retry::Verdict::Success),
    ("RETRY", retry::Verdict::Retry),
    ("STOP", retry::Verdict::Stop),
];

const OUTCOMES: [(&str, circuit::Outcome); 3] = [
    ("SUCCESS", circuit::Outcome::Success),
    ("FAILURE", circuit::Outcome::Failure),
    ("IGNORED", circuit::Outcome::Ignored),
];

/// The value named `text` as humus-build reads the option: canonical
/// (`DEADLINE_EXCEEDED`) or camel case (`DeadlineExceeded`), any case.
fn named<T: Copy>(text: &str, names: &[(&str, T)]) -> Option<T> {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_')
            .map(|c| c.to_ascii_uppercase())
            .collect()
    };
    let key = squash(text);
    names
        .iter()
        .find(|(name, _)| squash(name) == key)
        .map(|(_, value)| *value)
}

/// A method's checked policy: its `never_retry` and classify table, with
/// the checks humus-build makes at build time.
fn policy(option: &proto::MethodPolicy) -> Result<(bool, Vec<CodeRule>), String> {
    let mut table: Vec<CodeRule> = Vec::with_capacity(option.classify.len());
    for (index, entry) in option.classify.iter().enumerate() {
        let number = index + 1;
        let code = named(&entry.code, &CODES).ok_or_else(|| {
            let names = CODES.map(|(name, _)| name).join(", ");
            format!(
                "classify entry {number}: unknown gRPC status code {:?}; expected one of {names}",
                entry.code
            )
        })?;
        let retry = named(&entry.retry, &VERDICTS).ok_or_else(|| {
            format!(
                "classify entry {number}: unknown retry verdict {:?}; expected \"RETRY\", \"STOP\" or \"SUCCESS\"",
                entry.retry
            )
        })?;
        let breaker = named(&entry.breaker, &OUTCOMES).ok_or_else(|| {
            format!(
                "classify entry {number}: unknown breaker outcome {:?}; expected \"SUCCESS\", \"FAILURE\" or \"IGNORED\"",
                entry.breaker
            )
        })?;
        let name = CODES
            .iter()
            .find(|(_, c)| *c == code)
            .map_or("", |(n, _)| n);
        if let Some(first) = table.iter().position(|rule| rule.code == code) {
            return Err(format!(
                "classify lists {name} twice (entries {} and {number}); keep one",
                first + 1
            ));
        }
        if code == Code::Ok && breaker == circuit::Outcome::Failure {
            return Err(format!(
                "classify entry {number} counts OK as a FAILURE; use \"SUCCESS\" (or \"IGNORED\")"
            ));
        }
        if retry == retry::Verdict::Retry && code == Code::Ok {
            return Err(format!(
                "classify entry {number} retries OK; an attempt that succeeded is never sent again"
            ));
        }
        if retry == retry::Verdict::Retry && option.never_retry {
            return Err(format!(
                "classify entry {number} retries {name}, but the method is never_retry; use \"STOP\" or drop never_retry"
            ));
        }
        table.push(CodeRule {
            code,
            retry,
            breaker,
        });
    }
    Ok((option.never_retry, table))
}

/// The descriptor of the method at `path` with `kind` and policy
/// (`never_retry`, `table`): one per distinct method in the process,
/// made the first time a descriptor set declares it and kept (the
/// channel's calls hold `&'static` descriptors), so building [`Methods`]
/// from the same set again allocates nothing more.
fn described(
    path: &str,
    kind: RpcKind,
    never_retry: bool,
    table: Vec<CodeRule>,
) -> &'static Method {
    static KEPT: LazyLock<Mutex<HashMap<Box<str>, Vec<&'static Method>>>> =
        LazyLock::new(Mutex::default);
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    let versions = kept.entry(path.into()).or_default();
    if let Some(method) = versions.iter().find(|m| {
        m.kind == kind && m.policy.never_retry == never_retry && m.policy.table == table.as_slice()
    }) {
        return method;
    }
    let full_name: &'static str = Box::leak(path.into());
    let point: &'static str =
        Box::leak(format!("grpc:{}", path.strip_prefix('/').unwrap_or(path)).into_boxed_str());
    let table: &'static [CodeRule] = Box::leak(table.into_boxed_slice());
    let method: &'static Method = Box::leak(Box::new(Method {
        full_name,
        point,
        kind,
        policy: MethodPolicy {
            never_retry,
            table,
            classify: None,
        },
    }));
    versions.push(method);
    method
}

/// The well-known services' methods: `grpc.health.v1.Health` (`Check`,
/// `List`, `Watch`) and `grpc.reflection`'s `ServerReflectionInfo` (`v1`
/// and `v1alpha`), with no policy of their own.
static WELL_KNOWN: [Method; 5] = [
    Method {
        full_name: "/grpc.health.v1.Health/Check",
        point: "grpc:grpc.health.v1.Health/Check",
        kind: RpcKind::Unary,
        policy: MethodPolicy::DEFAULT,
    },
    Method {
        full_name: "/grpc.health.v1.Health/List",
        point: "grpc:grpc.health.v1.Health/List",
        kind: RpcKind::Unary,
        policy: MethodPolicy::DEFAULT,
    },
    Method {
        full_name: "/grpc.health.v1.Health/Watch",
        point: "grpc:grpc.health.v1.Health/Watch",
        kind: RpcKind::ServerStreaming,
        policy: MethodPolicy::DEFAULT,
    },
    Method {
        full_name: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        point: "grpc:grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        kind: RpcKind::Streaming,
        policy: MethodPolicy::DEFAULT,
    },
    Method {
        full_name: "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        point: "grpc:grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        kind: RpcKind::Streaming,
        policy: MethodPolicy::DEFAULT,
    },
];

/// The well-known method at `path`, if it is one ([`WELL_KNOWN`]).
pub(super) fn well_known(path: &str) -> Option<&'static Method> {
    if !path.starts_with("/grpc.") {
        return None;
    }
    WELL_KNOWN.iter().find(|m| m.full_name == path)
}

impl Methods {
    /// The methods of the services in `bytes`, an encoded
    /// `google.protobuf.FileDescriptorSet`: tonic-health's
    /// `pb::FILE_DESCRIPTOR_SET`, a googleapis crate's, or a build's own
    /// (humus-build's or tonic-build's `file_descriptor_set_path`,
    /// protoc's `--descriptor_set_out`). Each method of each service of
    /// each file gets its kind (`Check` unary, `Watch` a server stream), so
    /// a stock stub's unary calls are called as unary calls, bounded by
    /// [`Settings::timeout`](super::Settings::timeout) and retried.
    ///
    /// A method whose `.proto` declares the `humus.v1.policy` option
    /// (`never_retry`, its classify table) keeps it, as humus-build's
    /// descriptors do, when the set carries its options: humus-build's
    /// `file_descriptor_set_path` and protoc's `--descriptor_set_out`
    /// write them; a set made by encoding prost-types' `FileDescriptorSet`
    /// has dropped them (prost keeps no extension), and its methods have
    /// the client's policy.
    ///
    /// Each distinct method is described once in the process and kept
    /// (the channel's calls hold its descriptor): give sets that the
    /// program fixes (built in, or read once at start), not ones taken
    /// from servers at run time.
    ///
    /// # Errors
    ///
    /// [`DescriptorSetError`]: bytes that do not decode, a set with no
    /// file, a service or method with no name, a `humus.v1.policy` that
    /// humus-build would have refused (naming the file, the method and
    /// the entry), or one method declared twice with a different kind or
    /// policy.
    pub fn from_file_descriptor_set(bytes: &[u8]) -> Result<Methods, DescriptorSetError> {
        use prost::Message as _;
        let set = proto::FileDescriptorSet::decode(bytes)
            .map_err(|err| DescriptorSetError::Decode(err.to_string()))?;
        if set.file.is_empty() {
            return Err(DescriptorSetError::Empty);
        }
        let mut methods = Vec::new();
        for file in &set.file {
            let file_name = file.name.as_deref().unwrap_or("(a file with no name)");
            let package = file.package.as_deref().unwrap_or_default();
            for service in &file.service {
                let service_name =
                    service
                        .name
                        .as_deref()
                        .ok_or_else(|| DescriptorSetError::Unnamed {
                            file: file_name.to_owned(),
                            what: "service",
                        })?;
                for method in &service.method {
                    let name =
                        method
                            .name
                            .as_deref()
                            .ok_or_else(|| DescriptorSetError::Unnamed {
                                file: file_name.to_owned(),
                                what: "method",
                            })?;
                    let path = if package.is_empty() {
                        format!("/{service_name}/{name}")
                    } else {
                        format!("/{package}.{service_name}/{name}")
                    };
                    let kind = match (
                        method.client_streaming.unwrap_or(false),
                        method.server_streaming.unwrap_or(false),
                    ) {
                        (false, false) => RpcKind::Unary,
                        (true, false) => RpcKind::ClientStreaming,
                        (false, true) => RpcKind::ServerStreaming,
                        (true, true) => RpcKind::Streaming,
                    };
                    let (never_retry, table) = match method
                        .options
                        .as_ref()
                        .and_then(|options| options.policy.as_ref())
                    {
                        Some(option) => {
                            policy(option).map_err(|problem| DescriptorSetError::Policy {
                                file: file_name.to_owned(),
                                path: path.clone(),
                                problem,
                            })?
                        }
                        None => (false, Vec::new()),
                    };
                    methods.push(described(&path, kind, never_retry, table));
                }
            }
        }
        Methods::of(methods).map_err(DescriptorSetError::from)
    }

    /// The well-known services' methods, which every [`Channel`](super::Channel)
    /// knows without being given them: `grpc.health.v1.Health`'s `Check`
    /// and `List` (unary) and `Watch` (a server stream), and
    /// `ServerReflectionInfo` (a bidirectional stream) of
    /// `grpc.reflection.v1` and `grpc.reflection.v1alpha`. Each has the
    /// client's policy; a [`Channel::with_methods`](super::Channel::with_methods)
    /// list that names one of them wins.
    pub fn well_known() -> Methods {
        static ALL: LazyLock<Methods> = LazyLock::new(|| Methods::distinct(WELL_KNOWN.iter()));
        ALL.clone()
    }

    /// The methods of both lists: for one channel that calls services of
    /// several descriptor sets, or humus-build's descriptors beside a set's.
    /// A method both list with the same descriptor is one.
    ///
    /// # Errors
    ///
    /// [`DuplicateMethod`] when they list one path with different
    /// descriptors.
    pub fn join(&self, other: &Methods) -> Result<Methods, DuplicateMethod> {
        Methods::of(self.iter().chain(other.iter()))
    }
}
