//! The methods a [`Channel`](super::Channel) knows, by path, and the
//! descriptors of the paths it does not.

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::{Arc, LazyLock, RwLock};

use crate::grpc::client::{Method, MethodPolicy, RpcKind};
use crate::kept::{Kept, kept};

/// The methods a [`Channel`](super::Channel) knows, by path (`/package.Service/Method`):
/// the descriptors humus-build generates for each service
/// (`ledger_humus::LedgerProtoClient::METHODS`), so that a stock tonic
/// client's call of a method gets that method's kind and policy
/// (`never_retry`, its classify table), as the typed client's does.
///
/// A list can also be made from an encoded `FileDescriptorSet`
/// ([`Methods::from_file_descriptor_set`]: tonic-health's, a googleapis
/// crate's, a build's own), which gives each method its kind and its
/// `humus.v1.policy`, and lists joined ([`Methods::join`]). The
/// well-known services ([`Methods::well_known`]) are known to every
/// channel.
///
/// A method not known gets [`Settings::classify`](crate::grpc::client::Settings::classify),
/// the fault point `grpc:<path without its leading slash>`, and is called
/// as a stream that is sent once, bounded by the client's timeout until
/// its response headers (see [`Channel`](super::Channel)). Its path is kept
/// for the life of the process, for the first [`MAX_UNLISTED_PATHS`]
/// paths not listed; any further one is named `_OTHER` (see there).
#[derive(Clone, Default)]
pub struct Methods {
    pub(super) by_path: Arc<HashMap<&'static str, &'static Method, BuildHasherDefault<PathHasher>>>,
}

/// The hash of [`Methods`]' paths, looked up on every call: eight bytes a
/// step (FxHash's step), where the standard library's SipHash costs about
/// five times as much for a path of 30 to 40 bytes. Its keys are the
/// paths of the services given to [`Methods::new`], fixed by the program,
/// so a path a caller makes up cannot fill it with collisions.
#[derive(Default)]
pub(super) struct PathHasher(u64);

impl PathHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut le = [0u8; 8];
            le.copy_from_slice(word);
            self.add(u64::from_le_bytes(le));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut le = [0u8; 8];
            le[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(le));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        // The table's index is the low bits: fold the high ones, where the
        // multiplication carries most of what it mixed, into them.
        self.0 ^ (self.0 >> 32)
    }
}

impl fmt::Debug for Methods {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut paths: Vec<_> = self.by_path.keys().collect();
        paths.sort();
        f.debug_struct("Methods").field("paths", &paths).finish()
    }
}

/// Whether `a` and `b` describe one method alike: the same descriptor,
/// or two with the same names, kind and policy (a descriptor set's and a
/// well-known one), neither with a classify function of its own (which
/// cannot be told apart but by address).
fn same(a: &'static Method, b: &'static Method) -> bool {
    std::ptr::eq(a, b)
        || (a.full_name == b.full_name
            && a.point == b.point
            && a.kind == b.kind
            && a.policy.never_retry == b.policy.never_retry
            && a.policy.table == b.policy.table
            && a.policy.classify.is_none()
            && b.policy.classify.is_none())
}

/// Two different descriptors for one method path given to
/// [`Methods::new`]: two policies' lists of one service
/// (`Client::<Strict>::METHODS` and `Client::<Lenient>::METHODS`), or two
/// services generated with the same full name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Methods::new: two different descriptors for {path}: give each service's METHODS once, from one policy"
)]
pub struct DuplicateMethod {
    /// The method's path, `/package.Service/Method`.
    pub path: &'static str,
}

impl Methods {
    /// The methods of `services`, each a generated service's list of
    /// descriptors (`ledger_humus::LedgerProtoClient::METHODS`). The same
    /// list given twice is one, and so is one method described alike
    /// twice (the same path, kind and policy, no classify function).
    ///
    /// # Errors
    ///
    /// [`DuplicateMethod`] when two different descriptors name one path.
    pub fn new(services: &[&'static [&'static Method]]) -> Result<Methods, DuplicateMethod> {
        Methods::of(services.iter().flat_map(|methods| methods.iter().copied()))
    }

    /// The methods `methods` lists; the same descriptor twice is one.
    pub(in crate::grpc::client) fn of(
        methods: impl IntoIterator<Item = &'static Method>,
    ) -> Result<Methods, DuplicateMethod> {
        let mut by_path = HashMap::default();
        for method in methods {
            match by_path.insert(method.full_name, method) {
                Some(before) if !same(before, method) => {
                    return Err(DuplicateMethod {
                        path: method.full_name,
                    });
                }
                _ => {}
            }
        }
        Ok(Methods {
            by_path: Arc::new(by_path),
        })
    }

    /// The methods `methods` lists, each at a path of its own (no check).
    pub(in crate::grpc::client) fn distinct(
        methods: impl IntoIterator<Item = &'static Method>,
    ) -> Methods {
        Methods {
            by_path: Arc::new(methods.into_iter().map(|m| (m.full_name, m)).collect()),
        }
    }

    /// The descriptors listed, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &'static Method> + '_ {
        self.by_path.values().copied()
    }

    /// The descriptor of the method at `path` (`/package.Service/Method`),
    /// if it is listed.
    pub fn get(&self, path: &str) -> Option<&'static Method> {
        self.by_path.get(path).copied()
    }

    /// How many methods are listed.
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    /// Whether no method is listed.
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }
}

/// How many distinct paths not listed in any channel's [`Methods`] the
/// process keeps a descriptor for (its name, for telemetry and
/// classification, and its fault point): more than the methods of any set
/// of services a process calls, and a bound on what a client that makes
/// up its paths (a proxy, a client built from reflection) can make it
/// keep. Any further path not listed is still sent as it is, but its
/// calls are named `_OTHER` (OpenTelemetry's name for a method outside a
/// known set): their spans and metrics carry `rpc.method` `_OTHER`,
/// [`Settings::classify`](crate::grpc::client::Settings::classify) is given the path
/// `_OTHER`, and their fault point is `grpc:_OTHER`. List such methods
/// ([`Methods`]) to keep their names.
pub const MAX_UNLISTED_PATHS: usize = 4096;

/// The descriptor every path not listed gets once
/// [`MAX_UNLISTED_PATHS`] are kept.
static OTHER: Method = Method {
    full_name: crate::telemetry::names::RPC_METHOD_OTHER,
    point: "grpc:_OTHER",
    kind: RpcKind::Streaming,
    policy: UNLISTED_POLICY,
};

/// The policy of a method the channel does not know: sent once (a
/// request the server never saw is still sent again within its attempt,
/// as for any `never_retry` method), since it may not be idempotent; the
/// client's classify decides the rest.
const UNLISTED_POLICY: MethodPolicy = MethodPolicy {
    never_retry: true,
    ..MethodPolicy::DEFAULT
};

/// The descriptor of a method the channel does not know: its path, the
/// fault point `grpc:<path>`, no policy. Made once per path in the process
/// and kept (the paths of generated code are a set fixed at build time),
/// for the first [`MAX_UNLISTED_PATHS`] paths; [`OTHER`] after them.
pub(super) fn unknown(path: &str) -> &'static Method {
    unknown_in(path, MAX_UNLISTED_PATHS)
}

fn unknown_in(path: &str, max: usize) -> &'static Method {
    static SEEN: LazyLock<Kept<Method>> = LazyLock::new(RwLock::default);
    kept(&SEEN, path, max, &OTHER, || {
        let full_name: &'static str = Box::leak(path.into());
        let point: &'static str =
            Box::leak(format!("grpc:{}", path.strip_prefix('/').unwrap_or(path)).into_boxed_str());
        let method = Box::leak(Box::new(Method {
            full_name,
            point,
            // Not read: how an unknown method is called is the channel's
            // own rule (see `Channel`).
            kind: RpcKind::Streaming,
            policy: UNLISTED_POLICY,
        }));
        (full_name, method)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path not listed is kept once, with its own name and fault point;
    /// once the process keeps as many as it may, a new path is `_OTHER`,
    /// and the paths already kept keep their descriptors.
    #[test]
    fn unlisted_paths_are_kept_up_to_a_bound() {
        let kept = unknown_in("/test.Unlisted/Kept", usize::MAX);
        assert_eq!(kept.full_name, "/test.Unlisted/Kept");
        assert_eq!(kept.point, "grpc:test.Unlisted/Kept");
        assert!(std::ptr::eq(kept, unknown("/test.Unlisted/Kept")));
        // With the bound reached (0 here: the set is the process's, shared
        // by every test of this binary), a new path is not kept.
        let other = unknown_in("/test.Unlisted/New", 0);
        assert_eq!(other.full_name, "_OTHER");
        assert_eq!(other.point, "grpc:_OTHER");
        assert!(std::ptr::eq(other, &OTHER));
        assert!(std::ptr::eq(kept, unknown_in("/test.Unlisted/Kept", 0)));
        // Not kept: under the real bound it gets its own descriptor.
        assert_eq!(
            unknown("/test.Unlisted/New").full_name,
            "/test.Unlisted/New"
        );
    }
}
