#!/usr/bin/env python3
"""Finds intra-doc links that rustdoc left as text in the rendered docs.

rustdoc turns a resolved `[Code::Ok]` or `[`Code::Ok`]` into a link and
drops the brackets; one it cannot resolve (a path to a crate that is not a
dependency of the documented crate, a path written wrong) stays as
bracketed text, and `rustdoc::broken_intra_doc_links` does not always warn
about it. This walks the prose of every doc block under target/doc (not
code blocks, not link text) and reports each bracketed path left there.

Usage: python3 .ci/doc-links.py [target/doc]   (after `cargo doc`)
Exit status 1 when it finds any, 0 otherwise.
"""

import html.parser
import pathlib
import re
import sys

# `[`path`]` (the code span rendered, brackets outside it) or `[path]`; not
# an attribute (`#[humus::client]`) or an index (`a[i]`).
CODE_LINK = re.compile(r"(?<![#\w])\[`([^`\]]+)`\]")
PLAIN_LINK = re.compile(r"(?<![#\w])\[([A-Za-z_][\w]*(?:::[\w]+)*(?:\(\))?!?)\]")
CODE_SPAN = re.compile(r"`[^`]*`")


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

# Trait implementations show the trait's own docs, often another crate's
# (futures' `Stream`, tracing's `Instrument`), whose links point into docs
# that `--no-deps` does not build: not ours to fix.
FOREIGN = {"trait-implementations-list", "blanket-implementations-list", "synthetic-implementations-list"}


class Prose(html.parser.HTMLParser):
    """Collects the text of this crate's doc blocks, code spans as `...`,
    skipping <pre>, <a>, <script> and trait implementations."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []  # open elements: (tag, starts a doc block, skipped)
        self.block = None  # text of the doc block being read
        self.blocks = []

    def skipping(self):
        return any(skipped for _, _, skipped in self.stack)

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        skipped = tag in ("pre", "a", "script") or attrs.get("id") in FOREIGN
        starts = self.block is None and not self.skipping() and (
            "docblock" in classes or "docblock-short" in classes
        )
        self.stack.append((tag, starts, skipped))
        if starts:
            self.block = []
        elif self.block is not None and tag == "code" and not self.skipping():
            self.block.append("`")

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        # Pop to the matching element (tolerates an unclosed <p> or <li>).
        while self.stack:
            open_tag, starts, _ = self.stack.pop()
            if starts:
                self.blocks.append("".join(self.block))
                self.block = None
            if open_tag == tag:
                break
        else:
            return
        if self.block is not None and tag == "code" and not self.skipping():
            self.block.append("`")

    def handle_data(self, data):
        if self.block is not None and not self.skipping():
            self.block.append(data)


def unresolved(text):
    found = [f"[`{m}`]" for m in CODE_LINK.findall(text)]
    found += [f"[{m}]" for m in PLAIN_LINK.findall(CODE_SPAN.sub("", text))]
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/doc")
    if not root.is_dir():
        sys.exit(f"{root} is missing: run cargo doc first")
    problems = 0
    for page in sorted(root.rglob("*.html")):
        if "src" in page.relative_to(root).parts[:1] or page.name in ("all.html", "help.html", "settings.html"):
            continue
        parser = Prose()
        parser.feed(page.read_text(encoding="utf-8"))
        seen = set()
        for block in parser.blocks:
            for link in unresolved(block):
                if link not in seen:
                    seen.add(link)
                    problems += 1
                    print(f"{page.relative_to(root)}: {link} is not a link")
    if problems:
        print(f"{problems} bracketed path(s) rendered as text: fix the path, or link it explicitly")
        sys.exit(1)


if __name__ == "__main__":
    main()
