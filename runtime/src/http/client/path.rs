//! The check of a path given to [`Client::request`](super::Client::request):
//! it stays under the base URL's path.

use super::settings::is_dot_segment;

/// Why a path given to [`Client::request`](super::Client::request) would leave the base URL's
/// path, if it would.
pub(super) fn check_path(path: &str) -> Result<(), String> {
    // First, over the whole text: a URL parser drops a tab, LF or CR
    // wherever it is (`.\n.` is `..` to it), so no other check could see
    // the path it reads; nor is white space part of a URL.
    if let Some((i, c)) = path
        .char_indices()
        .find(|(_, c)| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "the path {path:?} holds {c:?} at byte {i}: a path has no white space or control character (a URL parser drops a tab or newline, which could make a '..' that leaves the base URL's path); percent-encode it (a space is %20)"
        ));
    }
    // Most paths hold no backslash, no `//` start, no `:` and no `.`
    // segment: one pass over the bytes tells.
    let end = path.find(['?', '#']).unwrap_or(path.len());
    let bytes = &path.as_bytes()[..end];
    if !bytes
        .iter()
        .any(|b| matches!(b, b'\\' | b':' | b'.' | b'%'))
        && !path.starts_with("//")
    {
        return Ok(());
    }
    if path.contains('\\') {
        return Err(format!(
            "the path {path:?} holds a backslash, which URL parsers read as '/', so it could leave the base URL's path: write '/' (or %5C for a backslash in a segment)"
        ));
    }
    if path.starts_with("//") {
        return Err(format!(
            "the path {path:?} starts with \"//\", which names a host: a client's paths are under its base URL"
        ));
    }
    let first = path[..end].split('/').next().unwrap_or_default();
    if let Some(colon) = first.find(':')
        && path[colon..].starts_with("://")
    {
        return Err(format!(
            "the path {path:?} is an absolute URL: a client's paths are under its base URL (send a request built with the URL in full through Client::execute)"
        ));
    }
    if let Some(segment) = path[..end].split('/').find(|s| is_dot_segment(s)) {
        return Err(format!(
            "the path {path:?} has the segment {segment:?}, a dot segment, which URL resolution removes ('..' with the segment before it), so the request would not go where written ('..' could leave the base URL's path): write the path without it"
        ));
    }
    // A server (or a proxy before it) that decodes `%2F` or `%5C` before it
    // routes reads `..%2Fadmin` as `../admin`: a dot segment between
    // encoded separators is refused too. An encoded slash elsewhere
    // (`objects/a%2Fb`) is a name's own character and passes.
    if let Some(segment) = path[..end]
        .split('/')
        .find(|s| encoded_parts(s).any(is_dot_segment))
    {
        return Err(format!(
            "the path {path:?} has the segment {segment:?}, which a server that decodes %2F or %5C before routing reads as holding a '.' or '..' segment that would leave the base URL's path: a client's paths are under its base URL"
        ));
    }
    // Servlet containers (Tomcat, and the frameworks on it) drop a
    // segment's parameters, from `;` on, before they route: `..;/admin`,
    // `..;x=1` or `%2e%2e%3b` is `..` to them.
    if let Some(segment) = path[..end].split('/').find(|s| {
        encoded_parts(s).any(|part| {
            let stem = without_parameters(part);
            stem.len() < part.len() && is_dot_segment(stem)
        })
    }) {
        return Err(format!(
            "the path {path:?} has the segment {segment:?}, which a server that drops a segment's parameters (from ';' on, as servlet containers do) reads as a '.' or '..' segment that would leave the base URL's path: a client's paths are under its base URL"
        ));
    }
    Ok(())
}

/// `part` up to its first `;` or percent-encoded `;` (`%3B`, either case):
/// the segment as a server that drops path parameters routes it.
pub(super) fn without_parameters(part: &str) -> &str {
    let bytes = part.as_bytes();
    let end = (0..bytes.len())
        .find(|&i| {
            bytes[i] == b';'
                || (bytes[i] == b'%'
                    && bytes
                        .get(i + 1..i + 3)
                        .is_some_and(|b| b.eq_ignore_ascii_case(b"3b")))
        })
        .unwrap_or(bytes.len());
    // `end` is on an ASCII byte or the end: a character boundary.
    &part[..end]
}

/// The parts of a path segment between its percent-encoded slashes and
/// backslashes (`%2F`, `%5C`, in either case): what a server that decodes
/// them before routing takes for segments.
fn encoded_parts(segment: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(segment);
    std::iter::from_fn(move || {
        let text = rest?;
        let bytes = text.as_bytes();
        let at = (0..bytes.len()).find(|&i| {
            bytes[i] == b'%'
                && bytes
                    .get(i + 1..i + 3)
                    .is_some_and(|b| b.eq_ignore_ascii_case(b"2f") || b.eq_ignore_ascii_case(b"5c"))
        });
        match at {
            // Three ASCII bytes: `text[i + 3..]` starts on a character.
            Some(i) => {
                rest = Some(&text[i + 3..]);
                Some(&text[..i])
            }
            None => {
                rest = None;
                Some(text)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A URL parser drops a tab, LF or CR anywhere in the text: a path
    /// with one is refused, before its dots could come together.
    #[test]
    fn white_space_and_control_characters_are_refused() {
        for path in [
            "users/.\n./..\n/admin",
            ".\n./etc",
            "%2e\t%2e/etc",
            ".\r.",
            "a\u{0}b",
            "a\u{7f}",
            "a\u{85}",
            "a b",
            "a\u{a0}b",
            "?q=a b",
            "#.\n.",
        ] {
            let why = check_path(path).unwrap_err();
            assert!(
                why.contains("white space or control character"),
                "{path:?}: {why}"
            );
        }
        // A `.` or `..` between encoded separators, which a server that
        // decodes `%2F` or `%5C` before routing reads as a segment.
        for path in [
            "..%2fadmin",
            "a/..%2Fadmin",
            "a%2F..%2Fb",
            "a%2f.",
            "%2e%2e%2fetc",
            "..%5cwindows",
            "x/%2E%5C..%5Cy?q=..%2f",
        ] {
            let why = check_path(path).unwrap_err();
            assert!(why.contains("decodes %2F or %5C"), "{path:?}: {why}");
        }
        // An encoded slash inside a name passes.
        for path in ["objects/a%2Fb", "a%2f.b", "%2f", "a%5c...b", "x?q=..%2f"] {
            assert_eq!(check_path(path), Ok(()), "{path:?}");
        }
        // A `.` or `..` with parameters, which a servlet container reads
        // as the dot segment alone.
        for path in [
            "..;/admin",
            "a/..;x=1/b",
            "%2e%2e%3b/admin",
            "..%3B",
            ".;",
            "a%2F..;%2Fb",
        ] {
            let why = check_path(path).unwrap_err();
            assert!(
                why.contains("drops a segment's parameters"),
                "{path:?}: {why}"
            );
        }
        // A name with parameters passes, and so do dots that are no segment.
        for path in ["a;v=1", "..a;b", "a/...;/b", ";..", "x?q=..;"] {
            assert_eq!(check_path(path), Ok(()), "{path:?}");
        }
        // A `%2` before a character of more than one byte is no dot (and
        // no panic).
        for path in ["%2é", "a/%2ü/b", "%2e%2é"] {
            assert_eq!(check_path(path), Ok(()), "{path:?}");
        }
    }
}
