#!/usr/bin/env python3
"""Checks the built book: every formula rendered, and nothing fetched from the network.

Usage: python3 .ci/check_book_html.py book/book

Fails, naming the page, when a page
- still shows TeX delimiters, \\( \\[ or $$, in its text outside code: a formula KaTeX did not render;
- holds an element of class katex-error: a formula KaTeX could not parse;
- holds an HTML element inside a formula's MathML, such as the <em> Markdown makes of two underscores;
- prints an underscore in a formula: `\\_` where a subscript `_` was meant;
- loads a script, stylesheet, image or frame from an http(s) or protocol-relative address;
- or when a stylesheet imports or points to such an address.
"""

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

RAW_TEX = re.compile(r"\\\(|\\\[|\$\$")
REMOTE = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
CSS_REMOTE = re.compile(r"(url\(\s*['\"]?|@import\s+['\"])\s*(https?:)?//", re.IGNORECASE)
# Text inside these is code or not text at all.
SKIP = {"pre", "code", "script", "style"}
# What may stand inside <math>: MathML's elements all start with "m", but for these.
MATHML_OTHERS = {"semantics", "annotation", "annotation-xml", "none"}
# The attributes through which a page loads something.
LOADS = {"script": "src", "link": "href", "img": "src", "iframe": "src", "source": "src", "audio": "src",
         "video": "src", "embed": "src", "object": "data"}


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.skipping = 0
        self.in_math = 0
        self.in_source = 0  # inside <annotation>, the formula's TeX
        self.problems = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in SKIP:
            self.skipping += 1
        if self.in_math and not (tag.startswith("m") or tag in MATHML_OTHERS):
            self.problems.append(f"<{tag}> inside a formula: Markdown has read the formula's text")
        if tag == "math":
            self.in_math += 1
        if tag == "annotation":
            self.in_source += 1
        if "katex-error" in (attrs.get("class") or "").split():
            self.problems.append(f"a KaTeX error: {attrs.get('title', '')}")
        url = attrs.get(LOADS.get(tag, ""))
        if url and REMOTE.match(url):
            self.problems.append(f"<{tag}> loads {url} from the network")

    def handle_endtag(self, tag):
        if tag in SKIP and self.skipping:
            self.skipping -= 1
        if tag == "math" and self.in_math:
            self.in_math -= 1
        if tag == "annotation" and self.in_source:
            self.in_source -= 1

    def handle_data(self, data):
        if self.in_math and not self.in_source and "_" in data:
            self.problems.append("a printed underscore in a formula: a subscript written as \\_?")
        if not self.skipping:
            for m in RAW_TEX.finditer(data):
                context = data[max(0, m.start() - 30) : m.end() + 30].replace("\n", " ")
                self.problems.append(f"raw TeX {m.group()!r} outside code: …{context}…")


def main(root):
    root = Path(root)
    pages = sorted(root.rglob("*.html"))
    if not pages:
        sys.exit(f"error: no HTML pages under {root}; build the book first")
    failed = False
    for path in pages:
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        page.close()
        for problem in page.problems:
            print(f"{path}: {problem}", file=sys.stderr)
            failed = True
    for path in sorted(root.rglob("*.css")):
        for m in CSS_REMOTE.finditer(path.read_text(encoding="utf-8")):
            print(f"{path}: points to the network: {m.group()}", file=sys.stderr)
            failed = True
    if failed:
        sys.exit("error: the built book has a broken formula or loads something from the network (see above)")
    print(f"{len(pages)} pages: every formula rendered, nothing loaded from the network")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "book/book")
