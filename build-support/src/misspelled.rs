//! Misspelled fields in a `humus.v1.policy` option.
//!
//! protox rejects an option value naming a field `humus.v1.MethodPolicy`
//! does not have (`never_retyr: true`) with a message about the whole
//! value, on the option's first line. When a file does not compile, it is
//! parsed again (protox's parser alone, which keeps options as written)
//! and every `humus.v1.policy` option of every method is read for fields
//! that do not exist: each is reported with its line, the method, and the
//! nearest field that does. A string field of a classify entry given a
//! bare name (`code: ABORTED`) is reported the same way, with the quoted
//! form to write.

use prost_types::FileDescriptorProto;

use crate::error::Problem;

/// `MethodPolicy`'s fields.
const POLICY_FIELDS: [&str; 2] = ["never_retry", "classify"];
/// `CodeRule`'s fields.
const RULE_FIELDS: [&str; 3] = ["code", "retry", "breaker"];

/// `FileDescriptorProto.service`, `ServiceDescriptorProto.method`,
/// `MethodDescriptorProto.options`, `MethodOptions.uninterpreted_option`.
const SERVICE_FIELD: i32 = 6;
const METHOD_FIELD: i32 = 2;
const OPTIONS_FIELD: i32 = 4;
const UNINTERPRETED_FIELD: i32 = 999;

/// The misspelled fields of the `humus.v1.policy` options in the file
/// `name` whose text is `source`; empty when there are none or the file
/// does not parse.
pub(crate) fn find(name: &str, source: &str) -> Vec<Problem> {
    let Ok(file) = protox_parse::parse(name, source) else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for (s, service) in file.service.iter().enumerate() {
        let full_service = if file.package().is_empty() {
            service.name().to_owned()
        } else {
            format!("{}.{}", file.package(), service.name())
        };
        for (m, method) in service.method.iter().enumerate() {
            let Some(options) = &method.options else {
                continue;
            };
            for (o, option) in options.uninterpreted_option.iter().enumerate() {
                let is_policy = option.name.first().is_some_and(|part| {
                    part.is_extension && part.name_part.trim_start_matches('.') == "humus.v1.policy"
                });
                if !is_policy {
                    continue;
                }
                let path = [
                    SERVICE_FIELD,
                    s as i32,
                    METHOD_FIELD,
                    m as i32,
                    OPTIONS_FIELD,
                    UNINTERPRETED_FIELD,
                    o as i32,
                ];
                let Some((line, column)) = start_of(&file, &path) else {
                    continue;
                };
                for (field_line, message) in check_statement(source, line, column) {
                    problems.push(Problem {
                        file: name.to_owned(),
                        line: Some(field_line as u32 + 1),
                        service: full_service.clone(),
                        method: method.name().to_owned(),
                        message,
                    });
                }
            }
        }
    }
    problems
}

/// The 0-based line and column where the item at `path` starts.
fn start_of(file: &FileDescriptorProto, path: &[i32]) -> Option<(usize, usize)> {
    let info = file.source_code_info.as_ref()?;
    let location = info
        .location
        .iter()
        .find(|location| location.path == path)?;
    Some((
        usize::try_from(*location.span.first()?).ok()?,
        usize::try_from(*location.span.get(1)?).ok()?,
    ))
}

/// A token of the option statement, with its 0-based line.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Punct(char),
    Text,
}

/// The tokens of `text` from `line`, `column` to the end of the statement
/// (the `;` outside any brackets).
fn tokens(text: &str, line: usize, column: usize) -> Vec<(usize, Token)> {
    let mut chars = text
        .lines()
        .enumerate()
        .skip(line)
        .flat_map(|(number, text)| text.chars().chain(['\n']).map(move |c| (number, c)))
        .skip(column)
        .peekable();
    let mut out = Vec::new();
    let mut depth = 0usize;
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
                out.push((number, Token::Text));
            }
            c if c.is_alphanumeric() || c == '_' || c == '-' || c == '+' => {
                let mut word = String::from(c);
                while let Some((_, next)) = chars.next_if(|(_, next)| {
                    next.is_alphanumeric() || *next == '_' || *next == '.' && c.is_ascii_digit()
                }) {
                    word.push(next);
                }
                out.push((number, Token::Word(word)));
            }
            ';' if depth == 0 => break,
            c => {
                match c {
                    '{' | '<' | '[' | '(' => depth += 1,
                    '}' | '>' | ']' | ')' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                out.push((number, Token::Punct(c)));
            }
        }
    }
    out
}

/// The misspelled fields of one `option (humus.v1.policy)... = ...;`
/// statement starting at `line`, `column`: each field's line and message.
fn check_statement(text: &str, line: usize, column: usize) -> Vec<(usize, String)> {
    let tokens = tokens(text, line, column);
    let mut problems = Vec::new();
    // `option ( humus . v1 . policy )`
    let Some(close) = tokens.iter().position(|(_, t)| *t == Token::Punct(')')) else {
        return problems;
    };
    let mut at = close + 1;
    let mut fields: &[&str] = &POLICY_FIELDS;
    let mut owner = "humus.v1.MethodPolicy";
    // `.never_retyr` or `.classify`
    while let (Some((_, Token::Punct('.'))), Some((field_line, Token::Word(word)))) =
        (tokens.get(at), tokens.get(at + 1))
    {
        if !fields.contains(&word.as_str()) {
            problems.push((*field_line, unknown(word, owner, fields)));
            return problems;
        }
        if word == "classify" {
            fields = &RULE_FIELDS;
            owner = "humus.v1.CodeRule";
        } else {
            return problems;
        }
        at += 2;
    }
    if tokens.get(at).map(|(_, t)| t) != Some(&Token::Punct('=')) {
        return problems;
    }
    at += 1;
    if matches!(tokens.get(at), Some((_, Token::Punct('{' | '<')))) {
        message(&tokens, &mut at, fields, owner, &mut problems);
    }
    problems
}

/// Reads the text-format message at `tokens[*at]` (its opening bracket)
/// whose fields are `fields`, reporting unknown ones; leaves `*at` past its
/// closing bracket.
fn message(
    tokens: &[(usize, Token)],
    at: &mut usize,
    fields: &[&str],
    owner: &str,
    problems: &mut Vec<(usize, String)>,
) {
    *at += 1;
    while let Some((field_line, token)) = tokens.get(*at) {
        match token {
            Token::Punct('}' | '>') => {
                *at += 1;
                return;
            }
            Token::Punct(',' | ';') => *at += 1,
            // An extension or Any field name, `[a.b]`: not ours.
            Token::Punct('[') => {
                skip_group(tokens, at);
                skip_value(tokens, at);
            }
            Token::Word(word) => {
                *at += 1;
                let known = fields.contains(&word.as_str());
                if !known {
                    problems.push((*field_line, unknown(word, owner, fields)));
                }
                if matches!(tokens.get(*at), Some((_, Token::Punct(':')))) {
                    *at += 1;
                }
                // `code`, `retry` and `breaker` are strings: a bare name
                // (`code: ABORTED`) is refused by protox with a message
                // about the whole option.
                if known
                    && RULE_FIELDS.contains(&word.as_str())
                    && let Some((value_line, Token::Word(value))) = tokens.get(*at)
                {
                    problems.push((
                        *value_line,
                        format!(
                            "`{word}: {value}`: {owner}'s `{word}` is a string; quote it: `{word}: \"{value}\"`"
                        ),
                    ));
                }
                if known && word == "classify" {
                    entries(tokens, at, problems);
                } else {
                    skip_value(tokens, at);
                }
            }
            _ => *at += 1,
        }
    }
}

/// The value of a `classify` field: one entry, or a list of them.
fn entries(tokens: &[(usize, Token)], at: &mut usize, problems: &mut Vec<(usize, String)>) {
    match tokens.get(*at) {
        Some((_, Token::Punct('{' | '<'))) => {
            message(tokens, at, &RULE_FIELDS, "humus.v1.CodeRule", problems);
        }
        Some((_, Token::Punct('['))) => {
            *at += 1;
            while let Some((_, token)) = tokens.get(*at) {
                match token {
                    Token::Punct(']') => {
                        *at += 1;
                        return;
                    }
                    Token::Punct('{' | '<') => {
                        message(tokens, at, &RULE_FIELDS, "humus.v1.CodeRule", problems);
                    }
                    _ => *at += 1,
                }
            }
        }
        _ => skip_value(tokens, at),
    }
}

/// Skips one value: a bracketed group, or one token.
fn skip_value(tokens: &[(usize, Token)], at: &mut usize) {
    match tokens.get(*at) {
        Some((_, Token::Punct('{' | '<' | '['))) => skip_group(tokens, at),
        Some(_) => *at += 1,
        None => {}
    }
}

/// Skips a bracketed group starting at `tokens[*at]`.
fn skip_group(tokens: &[(usize, Token)], at: &mut usize) {
    let mut depth = 0usize;
    while let Some((_, token)) = tokens.get(*at) {
        *at += 1;
        match token {
            Token::Punct('{' | '<' | '[') => depth += 1,
            Token::Punct('}' | '>' | ']') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return;
                }
            }
            _ => {}
        }
    }
}

/// "`never_retyr` is not a field of humus.v1.MethodPolicy; did you mean ..."
fn unknown(given: &str, owner: &str, fields: &[&str]) -> String {
    let list = fields
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let nearest = fields
        .iter()
        .map(|field| (distance(given, field), *field))
        .min_by_key(|(d, _)| *d)
        .filter(|(d, field)| *d <= field.len().max(given.len()).div_ceil(2))
        .map(|(_, field)| field);
    match nearest {
        Some(field) => format!(
            "unknown field `{given}` in the humus.v1.policy option ({owner} has {list}); did you mean `{field}`?"
        ),
        None => {
            format!("unknown field `{given}` in the humus.v1.policy option; {owner} has {list}")
        }
    }
}

/// The optimal string alignment distance (Levenshtein with transpositions).
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("retyr", "retry"), 1);
        assert_eq!(distance("never_retyr", "never_retry"), 1);
        assert_eq!(distance("code", "code"), 0);
        assert_eq!(distance("", "abc"), 3);
    }

    #[test]
    fn fields_are_found_in_every_form() {
        let text = "x\n  option (humus.v1.policy) = {\n    never_retyr: true // classfy {\n    classify: [{ code: \"A\" }, { retyr: \"RETRY\" }]\n    classify < breakr: \"X\" >\n  };\n";
        let found = check_statement(text, 1, 2);
        let lines: Vec<usize> = found.iter().map(|(line, _)| *line).collect();
        assert_eq!(lines, [2, 3, 4], "{found:?}");
        assert!(found[1].1.contains("did you mean `retry`?"), "{found:?}");
        let dotted = check_statement("option (humus.v1.policy).nevr_retry = true;", 0, 0);
        assert_eq!(dotted.len(), 1);
        assert!(dotted[0].1.contains("`never_retry`"));
        let classify = check_statement(
            "option (humus.v1.policy).classify = { code: \"A\" retyr: \"RETRY\" };",
            0,
            0,
        );
        assert_eq!(classify.len(), 1, "{classify:?}");
        assert!(classify[0].1.contains("humus.v1.CodeRule"));
        assert!(check_statement("option (humus.v1.policy).never_retry = true;", 0, 0).is_empty());
    }
}
