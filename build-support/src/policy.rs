//! Reading and checking the `humus.v1.policy` method option.
//!
//! prost's generated `MethodOptions` drops extension options, so the option
//! is read through prost-reflect from the pool protox built, where every
//! option is kept. Every method of every file is checked and every mistake
//! is collected before the build fails, so one build shows them all.

use std::collections::HashMap;

use prost_reflect::{DescriptorPool, DynamicMessage, MethodDescriptor, Value};

use crate::error::Problem;

/// The name of the embedded options file, as `.proto` files import it.
pub(crate) const OPTIONS_FILE: &str = "humus/v1/options.proto";

/// The text of the embedded options file.
pub(crate) const OPTIONS_SOURCE: &str = include_str!("../proto/humus/v1/options.proto");

/// The full name of the method option.
const EXTENSION: &str = "humus.v1.policy";

/// The option's field number in `google.protobuf.MethodOptions`.
const EXTENSION_NUMBER: i32 = 51917;

/// `MethodDescriptorProto.options` and `MethodPolicy.classify`, for source
/// locations.
const METHOD_OPTIONS_FIELD: i32 = 4;
const CLASSIFY_FIELD: i32 = 2;

/// The gRPC status codes: the canonical name (as gRPC's status code list
/// spells it) and `tonic::Code`'s variant.
pub(crate) const CODES: [(&str, &str); 17] = [
    ("OK", "Ok"),
    ("CANCELLED", "Cancelled"),
    ("UNKNOWN", "Unknown"),
    ("INVALID_ARGUMENT", "InvalidArgument"),
    ("DEADLINE_EXCEEDED", "DeadlineExceeded"),
    ("NOT_FOUND", "NotFound"),
    ("ALREADY_EXISTS", "AlreadyExists"),
    ("PERMISSION_DENIED", "PermissionDenied"),
    ("RESOURCE_EXHAUSTED", "ResourceExhausted"),
    ("FAILED_PRECONDITION", "FailedPrecondition"),
    ("ABORTED", "Aborted"),
    ("OUT_OF_RANGE", "OutOfRange"),
    ("UNIMPLEMENTED", "Unimplemented"),
    ("INTERNAL", "Internal"),
    ("UNAVAILABLE", "Unavailable"),
    ("DATA_LOSS", "DataLoss"),
    ("UNAUTHENTICATED", "Unauthenticated"),
];

/// A retry verdict, as `humus::retry::Verdict` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Success,
    Retry,
    Stop,
}

impl Verdict {
    const NAMES: [(&'static str, Verdict); 3] = [
        ("SUCCESS", Verdict::Success),
        ("RETRY", Verdict::Retry),
        ("STOP", Verdict::Stop),
    ];

    /// The variant's name in `humus::retry::Verdict`.
    pub(crate) fn variant(self) -> &'static str {
        match self {
            Verdict::Success => "Success",
            Verdict::Retry => "Retry",
            Verdict::Stop => "Stop",
        }
    }
}

/// A breaker outcome, as `humus::circuit::Outcome` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    Failure,
    Ignored,
}

impl Outcome {
    const NAMES: [(&'static str, Outcome); 3] = [
        ("SUCCESS", Outcome::Success),
        ("FAILURE", Outcome::Failure),
        ("IGNORED", Outcome::Ignored),
    ];

    /// The variant's name in `humus::circuit::Outcome`.
    pub(crate) fn variant(self) -> &'static str {
        match self {
            Outcome::Success => "Success",
            Outcome::Failure => "Failure",
            Outcome::Ignored => "Ignored",
        }
    }
}

/// One checked classify entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    /// Index into [`CODES`].
    pub(crate) code: usize,
    pub(crate) retry: Verdict,
    pub(crate) breaker: Outcome,
}

/// One method's checked policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) never_retry: bool,
    pub(crate) table: Vec<Rule>,
}

/// The checked policies of every annotated method, by
/// (`package.Service`, `Method`) as the `.proto` spells them.
pub(crate) type Policies = HashMap<(String, String), Policy>;

/// Reads and checks every method's `humus.v1.policy` option in `pool`.
///
/// # Errors
///
/// Every mistake found, each naming its file, line, service and method.
/// `source` gives the text of a file by its name, when it was read from
/// disk: an entry of a `{ ... }` option value has no location of its own,
/// so its line is found in the text.
pub(crate) fn read(
    pool: &DescriptorPool,
    source: &dyn Fn(&str) -> Option<String>,
) -> Result<Policies, Vec<Problem>> {
    let mut policies = Policies::new();
    let Some(extension) = pool.get_extension_by_name(EXTENSION) else {
        // No file imports the options: nothing is annotated.
        return Ok(policies);
    };
    let mut problems = Vec::new();
    for service in pool.services() {
        for method in service.methods() {
            let options = method.options();
            if !options.has_extension(&extension) {
                continue;
            }
            let value = options.get_extension(&extension);
            let Some(message) = value.as_message() else {
                continue;
            };
            let mut report = Reporter {
                method: &method,
                source,
                problems: &mut problems,
            };
            if let Some(policy) = check(message, &mut report) {
                policies.insert(
                    (service.full_name().to_owned(), method.name().to_owned()),
                    policy,
                );
            }
        }
    }
    if problems.is_empty() {
        Ok(policies)
    } else {
        Err(problems)
    }
}

/// Collects problems of one method, locating each in its file.
struct Reporter<'a> {
    method: &'a MethodDescriptor,
    source: &'a dyn Fn(&str) -> Option<String>,
    problems: &'a mut Vec<Problem>,
}

impl Reporter<'_> {
    /// Records a problem at the option's sub-path `sub` (fields below the
    /// extension), falling back to the enclosing locations.
    fn at(&mut self, sub: &[i32], message: String) {
        let file = self.method.parent_file();
        let mut path = self.method.path().to_vec();
        let method_len = path.len();
        path.push(METHOD_OPTIONS_FIELD);
        path.push(EXTENSION_NUMBER);
        path.extend_from_slice(sub);
        let option_len = method_len + 2;
        let found = file
            .file_descriptor_proto()
            .source_code_info
            .as_ref()
            .and_then(|info| {
                (method_len..=path.len()).rev().find_map(|len| {
                    info.location
                        .iter()
                        .find(|location| location.path == path[..len])
                        .map(|location| (len, location.span.clone()))
                })
            });
        let line = found.and_then(|(len, span)| {
            let start_line = usize::try_from(*span.first()?).ok()?;
            let start_column = usize::try_from(*span.get(1)?).ok()?;
            let entry = match sub {
                [CLASSIFY_FIELD, index] if len == option_len => Some(*index),
                _ => None,
            };
            let entry_line = entry.and_then(|index| {
                let text = (self.source)(file.name())?;
                classify_entry_line(
                    &text,
                    start_line,
                    start_column,
                    usize::try_from(index).ok()?,
                )
            });
            Some(entry_line.unwrap_or(start_line) as u32 + 1)
        });
        self.problems.push(Problem {
            file: file.name().to_owned(),
            line,
            service: self.method.parent_service().full_name().to_owned(),
            method: self.method.name().to_owned(),
            message,
        });
    }
}

/// The 0-based line of the `index`th `classify` entry of the option value
/// `{ ... }` whose statement starts at `line`, `column` of `text`.
fn classify_entry_line(text: &str, line: usize, column: usize, index: usize) -> Option<usize> {
    let mut chars = text
        .lines()
        .enumerate()
        .skip(line)
        .flat_map(|(number, text)| text.chars().chain(['\n']).map(move |c| (number, c)))
        .skip(column)
        .peekable();
    let mut depth = 0usize;
    let mut expect_value = false;
    let mut in_list = false;
    let mut seen = 0;
    while let Some((number, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '/' if chars.peek().is_some_and(|(_, next)| *next == '/') => {
                while chars.next_if(|(_, next)| *next != '\n').is_some() {}
            }
            '/' if chars.peek().is_some_and(|(_, next)| *next == '*') => {
                chars.next();
                let mut star = false;
                for (_, c) in chars.by_ref() {
                    if star && c == '/' {
                        break;
                    }
                    star = c == '*';
                }
            }
            '"' | '\'' => {
                let mut escaped = false;
                for (_, inner) in chars.by_ref() {
                    if inner == c && !escaped {
                        break;
                    }
                    escaped = inner == '\\' && !escaped;
                }
                expect_value = false;
            }
            '{' | '<' => {
                if depth == 1 && (expect_value || in_list) {
                    if seen == index {
                        return Some(number);
                    }
                    seen += 1;
                }
                expect_value = false;
                depth += 1;
            }
            '}' | '>' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return None;
                }
            }
            '[' => {
                in_list = depth == 1 && expect_value;
                expect_value = false;
            }
            ']' => in_list = false,
            ':' | ',' => {}
            ';' if depth == 0 => return None,
            c if c.is_alphanumeric() || c == '_' => {
                let mut word = String::from(c);
                while let Some((_, next)) =
                    chars.next_if(|(_, next)| next.is_alphanumeric() || *next == '_')
                {
                    word.push(next);
                }
                expect_value = depth == 1 && word == "classify";
            }
            _ => expect_value = false,
        }
    }
    None
}

/// Checks one method's option message; `None` when it has a mistake.
fn check(message: &DynamicMessage, report: &mut Reporter<'_>) -> Option<Policy> {
    let never_retry = message
        .get_field_by_name("never_retry")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let entries = message
        .get_field_by_name("classify")
        .map(|v| v.as_list().map(<[Value]>::to_vec).unwrap_or_default())
        .unwrap_or_default();
    let before = report.problems.len();
    let mut table: Vec<Rule> = Vec::new();
    let mut seen: Vec<(usize, usize)> = Vec::new(); // (code, entry number)
    for (index, entry) in entries.iter().enumerate() {
        let number = index + 1;
        let sub = [CLASSIFY_FIELD, i32::try_from(index).unwrap_or(i32::MAX)];
        let Some(entry) = entry.as_message() else {
            continue;
        };
        let text = |name: &str| {
            entry
                .get_field_by_name(name)
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        let (code_text, retry_text, breaker_text) = (text("code"), text("retry"), text("breaker"));
        let code = if code_text.is_empty() {
            report.at(
                &sub,
                format!("classify entry {number} has no `code`; set a gRPC status code such as \"ABORTED\""),
            );
            None
        } else {
            let code = parse_code(&code_text);
            if code.is_none() {
                let names = CODES.map(|(name, _)| name).join(", ");
                let message = match nearest_code(&code_text) {
                    Some(near) => format!(
                        "classify entry {number}: unknown gRPC status code {code_text:?}; did you mean {near:?}? (one of {names})"
                    ),
                    None => format!(
                        "classify entry {number}: unknown gRPC status code {code_text:?}; expected one of {names}"
                    ),
                };
                report.at(&sub, message);
            }
            code
        };
        let retry = named(&retry_text, &Verdict::NAMES);
        if retry.is_none() {
            report.at(
                &sub,
                if retry_text.is_empty() {
                    format!("classify entry {number} has no `retry`; expected \"RETRY\", \"STOP\" or \"SUCCESS\"")
                } else {
                    format!("classify entry {number}: unknown retry verdict {retry_text:?}; expected \"RETRY\", \"STOP\" or \"SUCCESS\"")
                },
            );
        }
        let breaker = named(&breaker_text, &Outcome::NAMES);
        if breaker.is_none() {
            report.at(
                &sub,
                if breaker_text.is_empty() {
                    format!("classify entry {number} has no `breaker`; expected \"SUCCESS\", \"FAILURE\" or \"IGNORED\"")
                } else {
                    format!("classify entry {number}: unknown breaker outcome {breaker_text:?}; expected \"SUCCESS\", \"FAILURE\" or \"IGNORED\"")
                },
            );
        }
        if let Some(code) = code {
            let name = CODES[code].0;
            if let Some((_, first)) = seen.iter().find(|(c, _)| *c == code) {
                report.at(
                    &sub,
                    format!("classify lists {name} twice (entries {first} and {number}); keep one"),
                );
            } else {
                seen.push((code, number));
            }
            if code == 0 && breaker == Some(Outcome::Failure) {
                report.at(
                    &sub,
                    format!("classify entry {number} counts OK as a FAILURE: every successful call would count against the dependency and open its breaker; use \"SUCCESS\" (or \"IGNORED\")"),
                );
            }
            if retry == Some(Verdict::Retry) {
                if code == 0 {
                    report.at(
                        &sub,
                        format!("classify entry {number} retries OK; an attempt that succeeded is never sent again"),
                    );
                }
                if never_retry {
                    report.at(
                        &sub,
                        format!("classify entry {number} retries {name}, but the method is never_retry; use \"STOP\" or drop never_retry"),
                    );
                }
            }
        }
        if let (Some(code), Some(retry), Some(breaker)) = (code, retry, breaker) {
            table.push(Rule {
                code,
                retry,
                breaker,
            });
        }
    }
    (report.problems.len() == before).then_some(Policy { never_retry, table })
}

/// The index in [`CODES`] of a status code name: canonical
/// (`DEADLINE_EXCEEDED`) or camel case (`DeadlineExceeded`), any case.
pub(crate) fn parse_code(text: &str) -> Option<usize> {
    let key = squash(text);
    CODES.iter().position(|(name, _)| squash(name) == key)
}

/// The canonical name of the status code nearest to `text`, if it is near
/// enough to be a misspelling (an edit distance of at most a third of its
/// length, spellings compared as [`parse_code`] does).
fn nearest_code(text: &str) -> Option<&'static str> {
    let key = squash(text);
    CODES
        .iter()
        .map(|(name, _)| (crate::misspelled::distance(&key, &squash(name)), *name))
        .filter(|(d, name)| *d <= squash(name).len().max(key.len()).div_ceil(3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name)
}

fn named<T: Copy>(text: &str, names: &[(&str, T)]) -> Option<T> {
    let key = squash(text);
    names
        .iter()
        .find(|(name, _)| squash(name) == key)
        .map(|(_, value)| *value)
}

/// Upper case without underscores, so spellings compare equal.
fn squash(text: &str) -> String {
    text.chars()
        .filter(|c| *c != '_')
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelled_code_has_its_nearest() {
        assert_eq!(nearest_code("ABORTD"), Some("ABORTED"));
        assert_eq!(nearest_code("unavailabel"), Some("UNAVAILABLE"));
        assert_eq!(nearest_code("DeadlineExeeded"), Some("DEADLINE_EXCEEDED"));
        assert_eq!(nearest_code("TEAPOT"), None);
    }

    #[test]
    fn codes_parse_in_every_spelling() {
        assert_eq!(parse_code("ABORTED"), Some(10));
        assert_eq!(parse_code("Aborted"), Some(10));
        assert_eq!(parse_code("deadline_exceeded"), Some(4));
        assert_eq!(parse_code("DeadlineExceeded"), Some(4));
        assert_eq!(parse_code("ABORTD"), None);
        assert_eq!(parse_code(""), None);
    }

    #[test]
    fn classify_entries_are_found_in_an_option_value() {
        let text = "  rpc A(R) returns (R) {\n    option (humus.v1.policy) = {\n      never_retry: false // classify {\n      classify: { code: \"}\" retry: \"RETRY\" breaker: \"SUCCESS\" }\n      /* classify { */ classify <code: \"A\">\n      classify: [\n        { code: \"B\" },\n        { code: \"C\" }\n      ]\n    };\n  }\n";
        let find = |index| classify_entry_line(text, 1, 4, index);
        assert_eq!(find(0), Some(3));
        assert_eq!(find(1), Some(4));
        assert_eq!(find(2), Some(6));
        assert_eq!(find(3), Some(7));
        assert_eq!(find(4), None);
    }

    #[test]
    fn verdicts_and_outcomes_parse() {
        assert_eq!(named("retry", &Verdict::NAMES), Some(Verdict::Retry));
        assert_eq!(named("IGNORED", &Outcome::NAMES), Some(Outcome::Ignored));
        assert_eq!(named("maybe", &Verdict::NAMES), None);
    }
}
