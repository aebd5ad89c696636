//! The Rust names prost gives a `.proto`'s items, as far as humus-build's
//! own names must stay clear of them.

use std::collections::HashMap;

use heck::ToSnakeCase;
use prost_reflect::{DescriptorPool, FileDescriptor};

use crate::error::Problem;

/// prost's snake-case name of a proto identifier (its fields', methods'
/// and nested modules' names): heck's snake case, a raw identifier for a
/// keyword, `_` appended to a keyword that cannot be raw, `_` prepended to a
/// leading digit.
pub(crate) fn prost_snake(name: &str) -> String {
    let ident = name.to_snake_case();
    match ident.as_str() {
        "as" | "break" | "const" | "continue" | "else" | "enum" | "false" | "fn" | "for" | "if"
        | "impl" | "in" | "let" | "loop" | "match" | "mod" | "move" | "mut" | "pub" | "ref"
        | "return" | "static" | "struct" | "trait" | "true" | "type" | "unsafe" | "use"
        | "where" | "while" | "dyn" | "abstract" | "become" | "box" | "do" | "final" | "macro"
        | "override" | "priv" | "typeof" | "unsized" | "virtual" | "yield" | "async" | "await"
        | "try" | "gen" => format!("r#{ident}"),
        "_" | "super" | "self" | "extern" | "crate" => format!("{ident}_"),
        s if s.starts_with(|c: char| c.is_numeric()) => format!("_{ident}"),
        _ => ident,
    }
}

/// Per package, the module name prost may give each top-level message
/// (for its nested types and oneofs), with the message's name.
pub(crate) fn message_modules(
    fds: &prost_types::FileDescriptorSet,
) -> HashMap<String, HashMap<String, String>> {
    let mut modules: HashMap<String, HashMap<String, String>> = HashMap::new();
    for file in &fds.file {
        let package = modules.entry(file.package().to_owned()).or_default();
        for message in &file.message_type {
            package.insert(prost_snake(message.name()), message.name().to_owned());
        }
    }
    modules
}

/// Which inherent methods tonic-prost-build's client stub defines beside
/// the RPCs' (`tonic-build`'s client generator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StubMethods {
    /// No client stub.
    None,
    /// `new`, `with_origin`, `with_interceptor`, the compression and
    /// message size setters.
    Client,
    /// Those and `connect`, with the transport helpers.
    ClientAndConnect,
}

impl StubMethods {
    fn names(self) -> &'static [&'static str] {
        const CLIENT: [&str; 8] = [
            "new",
            "with_origin",
            "with_interceptor",
            "send_compressed",
            "accept_compressed",
            "max_decoding_message_size",
            "max_encoding_message_size",
            "connect",
        ];
        match self {
            StubMethods::None => &[],
            StubMethods::Client => &CLIENT[..7],
            StubMethods::ClientAndConnect => &CLIENT,
        }
    }
}

/// Two RPCs of one service that prost names alike (`GetFoo` and `get_foo`
/// are both `get_foo`): tonic-prost-build's stubs and the typed client
/// would define the method twice. One problem per clash, at the second
/// RPC. And an RPC whose Rust name is one of the methods tonic's client
/// stub defines of its own (`New` is `new`), which would be defined twice
/// in the stub, as plain tonic-prost-build's output fails too.
pub(crate) fn rpc_clashes(pool: &DescriptorPool, stub: StubMethods) -> Vec<Problem> {
    let mut problems = Vec::new();
    for service in pool.services() {
        if service.parent_file().name() == crate::policy::OPTIONS_FILE {
            continue;
        }
        let mut seen: HashMap<String, String> = HashMap::new();
        for method in service.methods() {
            let rust = prost_snake(method.name());
            if stub.names().contains(&rust.as_str()) {
                problems.push(Problem {
                    file: service.parent_file().name().to_owned(),
                    line: line_of(&service.parent_file(), method.path()),
                    service: service.full_name().to_owned(),
                    method: method.name().to_owned(),
                    message: format!(
                        "RPC `{}` is `{rust}` in Rust, a method tonic's generated client \
                         (`{}_client::{}Client`) defines of its own, so it would be defined \
                         twice; rename the RPC{}",
                        method.name(),
                        crate::generate::naive_snake(service.name()),
                        service.name(),
                        if rust == "connect" {
                            ", or turn tonic's transport helpers off (`build_transport(false)`)"
                        } else {
                            ", or turn tonic's client stubs off (`build_client(false)`)"
                        }
                    ),
                });
            }
            match seen.get(&rust) {
                Some(first) => problems.push(Problem {
                    file: service.parent_file().name().to_owned(),
                    line: line_of(&service.parent_file(), method.path()),
                    service: service.full_name().to_owned(),
                    method: method.name().to_owned(),
                    message: format!(
                        "RPCs `{first}` and `{}` are both `{rust}` in Rust, so the generated \
                         clients would define it twice; rename one of them",
                        method.name()
                    ),
                }),
                None => {
                    seen.insert(rust, method.name().to_owned());
                }
            }
        }
    }
    problems
}

/// The 1-based line where the item at `path` of `file` starts, when the
/// file carries source information.
pub(crate) fn line_of(file: &FileDescriptor, path: &[i32]) -> Option<u32> {
    let info = file.file_descriptor_proto().source_code_info.as_ref()?;
    let location = info
        .location
        .iter()
        .find(|location| location.path == path)?;
    Some(u32::try_from(*location.span.first()?).ok()? + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_prost() {
        assert_eq!(prost_snake("GetFoo"), "get_foo");
        assert_eq!(prost_snake("get_foo"), "get_foo");
        assert_eq!(prost_snake("LedgerHumus"), "ledger_humus");
        assert_eq!(prost_snake("Type"), "r#type");
        assert_eq!(prost_snake("Self"), "self_");
        assert_eq!(prost_snake("HTTPServer"), "http_server");
    }
}
