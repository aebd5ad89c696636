//! Why a build failed.

use std::fmt;
use std::io;

/// Why [`Builder::compile_protos`](crate::Builder::compile_protos) failed.
///
/// `Display` and `Debug` print the same human-readable text, so a
/// `build.rs` that returns or unwraps this error shows it as is: protox's
/// own message (`file:line:column: what`) for a `.proto` that does not
/// compile, and one line per mistake (`file:line: package.Service/Method:
/// what`) for bad `humus.v1.policy` annotations.
pub struct Error {
    kind: Kind,
}

enum Kind {
    /// protox could not compile the `.proto` files; with the failing file
    /// as the build gave it (its include folder joined with its name).
    Compile(protox::Error, Option<String>),
    /// protox's error with what it means for a humus build: a `.proto`
    /// given to the build, or one a file imports, not where the build
    /// looked (with the folders looked in), or the options used without
    /// their import. The whole message.
    Explained(Option<protox::Error>, String),
    /// One or more `humus.v1.policy` annotations are wrong.
    Annotations(Vec<Problem>),
    /// Two RPCs of a service would have the same Rust name.
    Names(Vec<Problem>),
    /// Generating or writing the Rust code failed.
    Generate(io::Error),
}

/// One mistake in a `humus.v1.policy` annotation, or one clash of two
/// RPCs' Rust names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub(crate) file: String,
    pub(crate) line: Option<u32>,
    pub(crate) service: String,
    pub(crate) method: String,
    pub(crate) message: String,
}

impl Problem {
    /// The `.proto` file, as the build gave it: its include folder joined
    /// with its name (`proto/payments/v1/payments.proto` for the include
    /// folder `proto`).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The 1-based line of the annotation, when the file carries source
    /// information (it does when compiled from source).
    pub fn line(&self) -> Option<u32> {
        self.line
    }

    /// The service's full name, `package.Service`.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The method's name as the `.proto` spells it.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": {}/{}: {}", self.service, self.method, self.message)
    }
}

impl Error {
    pub(crate) fn compile(error: protox::Error, path: Option<String>) -> Error {
        Error {
            kind: Kind::Compile(error, path),
        }
    }

    pub(crate) fn annotations(problems: Vec<Problem>) -> Error {
        Error {
            kind: Kind::Annotations(problems),
        }
    }

    pub(crate) fn names(problems: Vec<Problem>) -> Error {
        Error {
            kind: Kind::Names(problems),
        }
    }

    pub(crate) fn generate(error: io::Error) -> Error {
        Error {
            kind: Kind::Generate(error),
        }
    }

    /// The annotation mistakes, or the RPC name clashes, in file order;
    /// empty when the build failed for another reason.
    pub fn problems(&self) -> &[Problem] {
        match &self.kind {
            Kind::Annotations(problems) | Kind::Names(problems) => problems,
            _ => &[],
        }
    }

    pub(crate) fn explained(error: Option<protox::Error>, message: String) -> Error {
        Error {
            kind: Kind::Explained(error, message),
        }
    }

    /// Whether protox could not compile the `.proto` files (one of them,
    /// or a file one imports, missing included).
    pub fn is_compile(&self) -> bool {
        matches!(self.kind, Kind::Compile(..) | Kind::Explained(..))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            // protox's `Debug` is its message prefixed with `file:line:column:`,
            // the file by its name under the include folder: shown as the
            // build gave it instead.
            Kind::Compile(error, path) => f.write_str(&compile_text(error, path.as_deref())),
            Kind::Annotations(problems) => {
                let count = problems.len();
                write!(
                    f,
                    "{count} bad humus.v1.policy annotation{}:",
                    if count == 1 { "" } else { "s" }
                )?;
                for problem in problems {
                    write!(f, "\n  {problem}")?;
                }
                Ok(())
            }
            Kind::Names(problems) => {
                let count = problems.len();
                write!(
                    f,
                    "{count} RPC name clash{} in the generated Rust code:",
                    if count == 1 { "" } else { "es" }
                )?;
                for problem in problems {
                    write!(f, "\n  {problem}")?;
                }
                Ok(())
            }
            Kind::Explained(_, message) => f.write_str(message),
            Kind::Generate(error) => write!(f, "generating Rust code: {error}"),
        }
    }
}

/// protox's message, `file:line:column: what` with the file by its name
/// under its include folder, with the file shown as `path` instead (as the
/// build gave it) when known.
pub(crate) fn compile_text(error: &protox::Error, path: Option<&str>) -> String {
    let text = format!("{error:?}");
    let rest = error.file().and_then(|name| text.strip_prefix(name));
    match (path, rest) {
        (Some(path), Some(rest)) if rest.starts_with(':') => format!("{path}{rest}"),
        _ => text,
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::Compile(error, _) | Kind::Explained(Some(error), _) => Some(error),
            Kind::Annotations(_) | Kind::Names(_) | Kind::Explained(None, _) => None,
            Kind::Generate(error) => Some(error),
        }
    }
}

impl From<Error> for io::Error {
    fn from(error: Error) -> io::Error {
        io::Error::other(error)
    }
}
