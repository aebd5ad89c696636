//! `humus-build`: the `build.rs` plugin that compiles `.proto` files with
//! protox (no system `protoc`) and generates, per package, the prost
//! messages, tonic's client and server stubs (as `tonic-prost-build` would),
//! and per service a typed humus client with a static descriptor per method.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), humus_build::Error> {
//!     humus_build::configure().compile_protos(&["proto/ledger.proto"], &["proto"])
//! }
//! ```
//!
//! ```ignore
//! // src/lib.rs
//! pub mod pb {
//!     include!(concat!(env!("OUT_DIR"), "/ledger.v1.rs"));
//! }
//! let ledger = pb::ledger_humus::LedgerProtoClient::new(humus_client);
//! let reply = ledger.transfer(request).await?;
//! ```
//!
//! # What is generated
//!
//! Next to what tonic-prost-build writes for a service `ledger.v1.Ledger`
//! (`ledger_client`, `ledger_server`), the package's file gets a module
//! `ledger_humus` with:
//!
//! | item | what it is |
//! |---|---|
//! | `pub trait Policy` | `const CHANGES: Changes`: what a policy type changes in its methods' policies, each by the method's Rust name (`r#` left out), nothing by default |
//! | `pub trait Descriptors` | implemented for every `Policy`: `METHODS`, every method's descriptor with the policy type's changes; `CHECK_CHANGES`, the check of `CHANGES`' names (below) |
//! | `pub enum ProtoPolicy {}` | the `Policy` that changes nothing: the `.proto`'s policy |
//! | `pub struct Client<P: Policy = ProtoPolicy>` | the typed client: `new(humus client)` (and `From`), one method per RPC of all four kinds (a plain `fn` returning the call's future, a `humus::codegen::Call<'_, Response>` that boxes the humus client's, made when it is called so that the deadline and context are read then) carrying the proto comments as docs; `Client::<P>::TRANSFER`, the `&'static Method` each call passes (one per RPC: full name `/ledger.v1.Ledger/Transfer`, fault point `grpc:ledger.v1.Ledger/Transfer`, kind, and the policy the `.proto` declares with `P`'s changes, merged at compile time), and `Client::<P>::METHODS`, all of them |
//! | `pub type LedgerProtoClient = Client<ProtoPolicy>` | the typed client with the `.proto`'s policy only (named apart from the attribute's `LedgerHumusClient`, so that importing one for the other is an error) |
//!
//! `#[humus::client(service = path::to::ledger_humus)] trait Ledger`
//! implements `Policy` for a type of its own (`LedgerPolicy`) to change
//! methods' policies in Rust; its client is `LedgerHumusClient =
//! Client<LedgerPolicy>`, with the same methods.
//!
//! A policy type may also implement `Policy` by hand, without the
//! attribute (which checks its names at the user's tokens). Each method
//! its `CHANGES` names must be one of the service's, by its Rust name, and
//! at most once: else the build fails with an error that names the
//! service and the method, lists the service's methods by those names
//! and suggests the nearest (`` `chrage` is not a method of
//! `ledger.v1.Ledger` ... Did you mean `charge`? ``). The check is
//! `Descriptors::CHECK_CHANGES`, a constant evaluated once per policy type
//! where its client is made (`Client::<P>::new`, `From`) or its `METHODS`
//! list is evaluated: it fails `cargo build` and `cargo test` of code that
//! does either, not `cargo check` (which evaluates no constant of generic
//! code), and not code that only reads one method's descriptor
//! (`Client::<P>::CHARGE`). A change's classify table is checked where its
//! method's descriptor is evaluated: one that retries `Ok`, counts it a `Failure`, lists a code
//! twice, or retries a code of a `never_retry` method fails the build,
//! naming the method.
//!
//! ## Names
//!
//! None of these names can be one prost or tonic gives an item of the
//! `.proto`, so a module can use tonic's `ledger_client::LedgerClient` and
//! `ledger_server::Ledger` next to `ledger_humus::LedgerProtoClient`, and
//! any RPC name tonic's stubs take works:
//!
//! - an RPC whose Rust name is `new`, `client` or `into_client` takes that
//!   method of the typed client (which is then built with `From`, and gives
//!   its humus client with `AsRef` and `From`); one named `Methods` takes
//!   `Client::<P>::METHODS` (the list is then `Descriptors::METHODS`);
//! - when a top-level message's module (prost's, for its nested types) is
//!   `ledger_humus`, as for a message `LedgerHumus`, the humus module of
//!   `Ledger` is `ledger_humus_` (prost's snake-case names never end in
//!   `_` but for a few keywords);
//! - two RPCs of one service with the same Rust name (`GetFoo` and
//!   `get_foo`) fail the build with an error naming the file, service and
//!   both methods, as tonic's stubs could not compile either; so does an
//!   RPC named as a method tonic's client stub has of its own (`New`,
//!   `WithOrigin`, `Connect`, ...), unless that stub (`build_client`), or
//!   for `Connect` its transport helpers (`build_transport`), is off.
//!
//! # The `humus.v1.policy` method option
//!
//! The crate ships `humus/v1/options.proto` and puts it on protox's include
//! path, so a `.proto` imports it with no copy in its tree:
//!
//! ```proto
//! import "humus/v1/options.proto";
//!
//! service Ledger {
//!   rpc Charge(ChargeRequest) returns (ChargeResponse) {
//!     option (humus.v1.policy).never_retry = true;
//!   }
//!   rpc Transfer(TransferRequest) returns (TransferResponse) {
//!     option (humus.v1.policy) = {
//!       classify: { code: "ABORTED" retry: "RETRY" breaker: "SUCCESS" }
//!     };
//!   }
//! }
//! ```
//!
//! `never_retry`: the method is never sent twice. `classify`: code →
//! (retry verdict `RETRY`/`STOP`/`SUCCESS`, breaker outcome
//! `SUCCESS`/`FAILURE`/`IGNORED`), consulted before the client's classify.
//! A mistake (an unknown code, verdict or outcome, a code listed twice, a
//! retry of `OK`, a retry entry on a `never_retry` method) fails the build
//! with one line per mistake naming the file, line, service and method; all
//! mistakes are reported at once. The option's text is
//! [`OPTIONS_PROTO`].
//!
//! Design: "Per-method policy" in humus's design page on the client
//! (`humus::design::client`).
#![warn(
    missing_debug_implementations,
    missing_docs,
    rust_2018_idioms,
    unreachable_pub
)]
#![deny(rustdoc::broken_intra_doc_links)]

mod error;
mod generate;
mod misspelled;
mod names;
mod policy;

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

pub use error::{Error, Problem};

/// The text of `humus/v1/options.proto`, the method option humus-build
/// reads. Every build imports this copy, before its include folders (a
/// copy in the tree, kept for protoc or buf in other languages, is not
/// read):
///
#[doc = concat!("```proto\n", include_str!("../proto/humus/v1/options.proto"), "```")]
pub const OPTIONS_PROTO: &str = policy::OPTIONS_SOURCE;

/// A [`Builder`] with tonic-prost-build's defaults: messages, client and
/// server stubs, and the typed humus clients.
pub fn configure() -> Builder {
    Builder {
        tonic: tonic_prost_build::configure(),
        build_client: true,
        build_server: true,
        build_transport: true,
        build_humus_client: true,
        proto_path: "super".to_owned(),
        disable_comments: HashSet::new(),
        file_descriptor_set_path: None,
        emit_rerun_if_changed: std::env::var_os("CARGO").is_some(),
    }
}

/// Compiles one `.proto` file with the defaults, its folder as the include
/// path.
///
/// # Errors
///
/// As [`Builder::compile_protos`].
pub fn compile_protos(proto: impl AsRef<Path>) -> Result<(), Error> {
    let proto = proto.as_ref();
    let dir = proto.parent().unwrap_or_else(|| Path::new("."));
    configure().compile_protos(&[proto], &[dir])
}

/// Configures code generation: the options tonic-prost-build's `Builder`
/// has (passed through to it), and humus's own.
#[derive(Debug, Clone)]
pub struct Builder {
    tonic: tonic_prost_build::Builder,
    build_client: bool,
    build_server: bool,
    build_transport: bool,
    build_humus_client: bool,
    proto_path: String,
    disable_comments: HashSet<String>,
    file_descriptor_set_path: Option<PathBuf>,
    emit_rerun_if_changed: bool,
}

/// Defines a pass-through option: same name and meaning as
/// tonic-prost-build's.
macro_rules! pass_through {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) $(<$($g:ident: $bound:path),*>)?) => {
        $(#[$doc])*
        pub fn $name$(<$($g: $bound),*>)?(mut self, $($arg: $ty),*) -> Self {
            self.tonic = self.tonic.$name($($arg),*);
            self
        }
    };
}

impl Builder {
    /// Whether to generate tonic's client stubs (`<service>_client`).
    /// Default on. The humus client does not need them.
    pub fn build_client(mut self, enable: bool) -> Self {
        self.build_client = enable;
        self.tonic = self.tonic.build_client(enable);
        self
    }

    /// Whether to generate tonic's server stubs (`<service>_server`).
    /// Default on.
    pub fn build_server(mut self, enable: bool) -> Self {
        self.build_server = enable;
        self.tonic = self.tonic.build_server(enable);
        self
    }

    /// Whether to generate the typed humus clients (`<service>_humus`).
    /// Default on.
    pub fn build_humus_client(mut self, enable: bool) -> Self {
        self.build_humus_client = enable;
        self
    }

    /// Whether tonic's stubs get transport helpers (`connect`). Default on.
    pub fn build_transport(mut self, enable: bool) -> Self {
        self.build_transport = enable;
        self.tonic = self.tonic.build_transport(enable);
        self
    }

    pass_through!(
        /// Where the generated files go. Default: `OUT_DIR`.
        out_dir(out_dir: impl AsRef<Path>)
    );

    pass_through!(
        /// Uses an existing Rust path for a protobuf package or type
        /// (`".google.protobuf"`, `"::prost_types"`), as prost's `extern_path`.
        extern_path(proto_path: impl AsRef<str>, rust_path: impl AsRef<str>)
    );

    pass_through!(
        /// Adds an attribute to matching fields, as prost's `field_attribute`.
        field_attribute(path: P, attribute: A) <P: AsRef<str>, A: AsRef<str>>
    );

    pass_through!(
        /// Adds an attribute to matching messages, as prost's `message_attribute`.
        message_attribute(path: P, attribute: A) <P: AsRef<str>, A: AsRef<str>>
    );

    pass_through!(
        /// Adds an attribute to matching enums, as prost's `enum_attribute`.
        enum_attribute(path: P, attribute: A) <P: AsRef<str>, A: AsRef<str>>
    );

    pass_through!(
        /// Adds an attribute to matching messages, enums and oneofs, as
        /// prost's `type_attribute`.
        type_attribute(path: P, attribute: A) <P: AsRef<str>, A: AsRef<str>>
    );

    pass_through!(
        /// Boxes a matching field, as prost's `boxed`.
        boxed(path: P) <P: AsRef<str>>
    );

    pass_through!(
        /// Uses `BTreeMap` for matching map fields, as prost's `btree_map`.
        btree_map(path: P) <P: AsRef<str>>
    );

    pass_through!(
        /// Uses `Bytes` for matching bytes fields, as prost's `bytes`.
        bytes(path: P) <P: AsRef<str>>
    );

    pass_through!(
        /// Adds an attribute to matching tonic server modules.
        server_mod_attribute(path: P, attribute: A) <P: AsRef<str>, A: AsRef<str>>
    );

    pass_through!(
        /// Adds an attribute to matching tonic server structs.
        server_attribute(path: P, attribute: A) <P: AsRef<str>, A: AsRef<str>>
    );

    pass_through!(
        /// Adds an attribute to matching tonic server traits.
        trait_attribute(path: P, attribute: A) <P: AsRef<str>, A: AsRef<str>>
    );

    pass_through!(
        /// Adds an attribute to matching tonic client modules.
        client_mod_attribute(path: P, attribute: A) <P: AsRef<str>, A: AsRef<str>>
    );

    pass_through!(
        /// Adds an attribute to matching tonic client structs.
        client_attribute(path: P, attribute: A) <P: AsRef<str>, A: AsRef<str>>
    );

    /// Where the messages are in the module tree, as seen from a service's
    /// modules. Default `super`. Applies to tonic's stubs and the humus
    /// client alike.
    pub fn proto_path(mut self, proto_path: impl AsRef<str>) -> Self {
        self.proto_path = proto_path.as_ref().to_owned();
        self.tonic = self.tonic.proto_path(proto_path);
        self
    }

    pass_through!(
        /// Generates the well-known types instead of using `prost-types`.
        compile_well_known_types(enable: bool)
    );

    /// Also writes the compiled `FileDescriptorSet` (imports, source
    /// information and extension options included) to `path`, e.g. for
    /// gRPC server reflection, or for a stock tonic stub's channel
    /// (`humus::grpc::client::Methods::from_file_descriptor_set`, which
    /// reads each method's kind and `humus.v1.policy` from it).
    pub fn file_descriptor_set_path(mut self, path: impl AsRef<Path>) -> Self {
        self.file_descriptor_set_path = Some(path.as_ref().to_path_buf());
        self
    }

    pass_through!(
        /// Also writes a file that `include!`s every generated package in
        /// nested modules, as prost's `include_file`.
        include_file(path: impl AsRef<Path>)
    );

    /// Whether to print `cargo:rerun-if-changed` for every `.proto` read.
    /// Default on when run by Cargo.
    pub fn emit_rerun_if_changed(mut self, enable: bool) -> Self {
        self.emit_rerun_if_changed = enable;
        self
    }

    /// Leaves out the comments of the given services (`package.Service`)
    /// and methods (`package.Service.Method`), in tonic's stubs and the
    /// humus client.
    pub fn disable_comments<I, S>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let paths: Vec<String> = paths.into_iter().map(|p| p.as_ref().to_owned()).collect();
        self.disable_comments.extend(paths.iter().cloned());
        self.tonic = self.tonic.disable_comments(paths);
        self
    }

    pass_through!(
        /// Takes `self: Arc<Self>` in tonic's server traits.
        use_arc_self(enable: bool)
    );

    pass_through!(
        /// Generates default `Unimplemented` stubs in tonic's server traits.
        generate_default_stubs(enable: bool)
    );

    pass_through!(
        /// The codec tonic's stubs use. Default `tonic_prost::ProstCodec`.
        codec_path(path: impl AsRef<str>)
    );

    /// Leaves out the `Debug` derive of matching messages, as prost's
    /// `skip_debug`.
    pub fn skip_debug<I, S>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.tonic = self.tonic.skip_debug(paths);
        self
    }

    /// Compiles `protos` (paths under one of `includes`) with protox,
    /// checks their `humus.v1.policy` options and writes the generated Rust
    /// code, one file per package (`ledger.v1.rs`), to the out dir.
    ///
    /// `humus/v1/options.proto` and the well-known types
    /// (`google/protobuf/*.proto`) are always importable, and always
    /// humus-build's own: a copy of them under `includes` (googleapis
    /// carries protoc's) is not read, so it may differ, or use syntax
    /// protox cannot read. A `google/protobuf/` file that is not one of the
    /// well-known types is looked for under `includes`.
    ///
    /// # Errors
    ///
    /// - a `.proto` given here that does not exist, or is not under any of
    ///   `includes`, and an import found under none of them: each named,
    ///   with the folders looked in and what to change;
    /// - protox's own message when a `.proto` does not compile (a syntax
    ///   error, an unknown type), but for a misspelled
    ///   field in a `humus.v1.policy` option (`never_retyr`), which is a
    ///   problem naming the field, its line, the method and the nearest
    ///   field, and for a classify entry's unquoted code, verdict or
    ///   outcome (`code: ABORTED`), a problem saying to quote it;
    /// - every bad `humus.v1.policy` annotation, each with its file, line,
    ///   service and method (see [`Error::problems`]);
    /// - an I/O error writing the output.
    pub fn compile_protos<P: AsRef<Path>>(self, protos: &[P], includes: &[P]) -> Result<(), Error> {
        // humus-build's own options and well-known types come first: a
        // tree's copies (googleapis carries protoc's) are not read.
        let mut resolver = protox::file::ChainFileResolver::new();
        resolver.add(EmbeddedOptions);
        resolver.add(protox::file::GoogleFileResolver::new());
        for include in includes {
            resolver.add(protox::file::IncludeFileResolver::new(
                include.as_ref().to_path_buf(),
            ));
        }
        let mut compiler = protox::Compiler::with_file_resolver(resolver);
        compiler.include_imports(true).include_source_info(true);
        check_inputs(protos, includes)?;
        if let Err(error) = compiler.open_files(protos.iter().map(AsRef::as_ref)) {
            return Err(if error.is_file_not_found() {
                not_found(error, protos, includes)
            } else {
                misspelled_or(error, includes)
            });
        }

        let pool = compiler.descriptor_pool();
        let paths: std::collections::HashMap<String, PathBuf> = compiler
            .files()
            .filter_map(|file| Some((file.name().to_owned(), file.path()?.to_path_buf())))
            .collect();
        let source = |name: &str| std::fs::read_to_string(paths.get(name)?).ok();
        let shown = |mut problems: Vec<Problem>| {
            for problem in &mut problems {
                if let Some(path) = shown_path(&problem.file, includes) {
                    problem.file = path;
                }
            }
            problems
        };
        let policies =
            policy::read(&pool, &source).map_err(|problems| Error::annotations(shown(problems)))?;
        let stub = match (self.build_client, self.build_transport) {
            (false, _) => names::StubMethods::None,
            (true, false) => names::StubMethods::Client,
            (true, true) => names::StubMethods::ClientAndConnect,
        };
        let clashes = names::rpc_clashes(&pool, stub);
        if !clashes.is_empty() {
            return Err(Error::names(shown(clashes)));
        }

        if let Some(path) = &self.file_descriptor_set_path {
            std::fs::write(path, compiler.encode_file_descriptor_set()).map_err(Error::generate)?;
        }
        if self.emit_rerun_if_changed {
            for file in compiler.files() {
                if let Some(path) = file.path() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }

        let mut fds = compiler.file_descriptor_set();
        let wanted = wanted_files(
            &fds,
            compiler
                .files()
                .filter(|file| !file.is_import())
                .map(|file| file.name().to_owned()),
        );
        fds.file.retain(|file| wanted.contains(file.name()));

        let tonic = (self.build_client || self.build_server)
            .then(|| self.tonic.clone().service_generator());
        let humus = self.build_humus_client.then(|| generate::HumusOptions {
            policies,
            proto_path: self.proto_path.clone(),
            disable_comments: self.disable_comments.clone(),
            message_modules: names::message_modules(&fds),
        });
        let mut config = prost_build::Config::new();
        config.type_attribute(".", "#[allow(clippy::all)]");
        if tonic.is_some() || humus.is_some() {
            config.service_generator(Box::new(generate::Generator {
                tonic,
                humus,
                package_modules: Vec::new(),
            }));
        }
        // With tonic's own client and server off, tonic-prost-build leaves
        // `config`'s service generator (ours, wrapping tonic's) in place.
        self.tonic
            .build_client(false)
            .build_server(false)
            .compile_fds_with_config(fds, config)
            .map_err(Error::generate)
    }
}

/// The file named `name` (`payments/v1/payments.proto`) as the build gave
/// it: joined to the first include folder that holds it, as protox found it
/// (`proto/payments/v1/payments.proto`), so an error names a path the user
/// can open.
fn shown_path<P: AsRef<Path>>(name: &str, includes: &[P]) -> Option<String> {
    includes
        .iter()
        .map(|include| include.as_ref().join(name))
        .find(|path| path.is_file())
        .map(|path| path.display().to_string())
}

/// The include folders, for an error: `` `proto`, `vendor` ``.
fn folders<P: AsRef<Path>>(includes: &[P]) -> String {
    if includes.is_empty() {
        return "none given".to_owned();
    }
    let shown: Vec<String> = includes
        .iter()
        .map(|include| format!("`{}`", include.as_ref().display()))
        .collect();
    shown.join(", ")
}

/// Each `.proto` given to the build exists, as a path or as a path under
/// an include folder (as protox reads a relative one); else the error
/// naming it, where it was looked for, and what to check. (protox says a
/// file that does not exist "is not in any include path", even one under
/// an include folder.)
fn check_inputs<P: AsRef<Path>>(protos: &[P], includes: &[P]) -> Result<(), Error> {
    for proto in protos {
        let path = proto.as_ref();
        let found = path.is_file()
            || (path.is_relative()
                && includes
                    .iter()
                    .any(|include| include.as_ref().join(path).is_file()));
        if !found {
            return Err(Error::explained(
                None,
                format!(
                    "`{}`: no such .proto file (include folders: {}); check the path given to \
                     compile_protos",
                    path.display(),
                    folders(includes)
                ),
            ));
        }
    }
    Ok(())
}

/// protox's error for a file it did not find, with where the build looked
/// and how to fix it: a `.proto` given to the build that is not under any
/// include folder, or an import found in none of them.
fn not_found<P: AsRef<Path>>(error: protox::Error, protos: &[P], includes: &[P]) -> Error {
    let folders = folders(includes);
    if error.file().is_none() {
        // A file given to the build, outside every include folder: its
        // path below one of them is the name it is imported by.
        let outside = protos
            .iter()
            .map(AsRef::as_ref)
            .find(|path| {
                !includes
                    .iter()
                    .any(|include| path.starts_with(include.as_ref()))
            })
            .map_or_else(
                || format!("{error}"),
                |path| format!("`{}`", path.display()),
            );
        return Error::explained(
            Some(error),
            format!(
                "{outside} is not under any include folder ({folders}): each .proto given to \
                 compile_protos must be under one of them (its path below the folder is the \
                 name other files import it by); add the folder its imports are relative to"
            ),
        );
    }
    let path = error.file().and_then(|name| shown_path(name, includes));
    let text = error::compile_text(&error, path.as_deref());
    Error::explained(
        Some(error),
        format!(
            "{text}: looked for among humus/v1/options.proto and the well-known types \
             (google/protobuf/*.proto), then under the include folders ({folders}); add \
             the folder that holds it to the include folders"
        ),
    )
}

/// The error of a file protox could not compile: the misspelled fields of
/// its `humus.v1.policy` options when it has any (protox names neither the
/// field nor the method), else protox's own.
fn misspelled_or<P: AsRef<Path>>(error: protox::Error, includes: &[P]) -> Error {
    let Some(name) = error.file().map(str::to_owned) else {
        return Error::compile(error, None);
    };
    let path = shown_path(&name, includes);
    let source = includes
        .iter()
        .find_map(|include| std::fs::read_to_string(include.as_ref().join(&name)).ok());
    match source.map(|source| misspelled::find(&name, &source)) {
        Some(mut problems) if !problems.is_empty() => {
            for problem in &mut problems {
                if let Some(path) = &path {
                    problem.file.clone_from(path);
                }
            }
            Error::annotations(problems)
        }
        _ => {
            let text = error::compile_text(&error, path.as_deref());
            if text.contains("'humus.v1.policy' is not defined") {
                // The option used without its import: protox knows no
                // such name.
                return Error::explained(
                    Some(error),
                    format!(
                        "{text}: the option is declared in humus/v1/options.proto, which \
                         humus-build provides; add `import \"humus/v1/options.proto\";` to the \
                         file"
                    ),
                );
            }
            Error::compile(error, path)
        }
    }
}

/// The files to generate code for: the requested ones and what they
/// import, but not `humus/v1/options.proto` nor what only it imports.
fn wanted_files(
    fds: &prost_types::FileDescriptorSet,
    roots: impl Iterator<Item = String>,
) -> BTreeSet<String> {
    let mut wanted = BTreeSet::new();
    let mut stack: Vec<String> = roots.filter(|name| name != policy::OPTIONS_FILE).collect();
    while let Some(name) = stack.pop() {
        if name == policy::OPTIONS_FILE || !wanted.insert(name.clone()) {
            continue;
        }
        if let Some(file) = fds.file.iter().find(|file| file.name() == name) {
            stack.extend(file.dependency.iter().cloned());
        }
    }
    wanted
}

/// Serves `humus/v1/options.proto` from the text built into this crate.
#[derive(Debug)]
struct EmbeddedOptions;

impl protox::file::FileResolver for EmbeddedOptions {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        if name == policy::OPTIONS_FILE {
            protox::file::File::from_source(name, policy::OPTIONS_SOURCE)
        } else {
            Err(protox::Error::file_not_found(name))
        }
    }
}
