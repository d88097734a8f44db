#!/usr/bin/env python3
"""Checks that the built book is self-contained: it works from any folder of any host, and loads nothing
from elsewhere.

Usage: python3 .ci/check_self_contained.py book/book

The book is published under a sub-path (https://user.github.io/repo/) and its pages are cross-origin
isolated by its service worker (src/coi-sw.js), whose `Cross-Origin-Embedder-Policy: require-corp` would
block what another origin serves without saying it may be embedded. So every address through which a page,
a stylesheet or a script loads something (scripts, stylesheets, icons, images, frames, fonts, workers,
imports, fetches, the service worker) must be relative and name a file of the built book. Links a reader
follows (<a href>) may point anywhere, but not to a path that starts with `/`.

Fails with one line per problem, naming the file and the address: an address on another host (http:,
https: or //host), a path that starts with `/`, or a relative path that names no file in the book. Only
literal addresses are read; in scripts, those passed straight to fetch, import, Worker, importScripts,
serviceWorker.register and new URL(…, import.meta.url).

The one exception is mdBook's 404 page, which the host serves at any depth and which therefore carries
`<base href="SITE-URL">` (output.html.site-url, `/` unless set; the Pages workflow sets the site's path):
its base may be an absolute path, and its relative addresses are read from the folder of the 404 page.
"""

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# Attributes through which an element loads something, by element.
LOADS = {
    "script": ["src"],
    "link": ["href"],
    "img": ["src", "srcset"],
    "source": ["src", "srcset"],
    "iframe": ["src"],
    "frame": ["src"],
    "audio": ["src"],
    "video": ["src", "poster"],
    "track": ["src"],
    "embed": ["src"],
    "object": ["data"],
    "input": ["src"],
    "image": ["href", "xlink:href"],
    "use": ["href", "xlink:href"],
}
# <link rel=…> that name a related page rather than load a resource.
LINK_NAVIGATION = {"canonical", "alternate", "next", "prev", "author", "help", "license", "search", "bookmark"}
CSS_URL = re.compile(r"""url\(\s*(['"]?)([^'")]*)\1\s*\)|@import\s+(['"])([^'"]*)\3""", re.IGNORECASE)
# A string literal passed straight to something that loads it, in a script.
JS_LOADS = re.compile(
    r"""(?:\bfetch|\bimport|\bimportScripts|\bnew\s+(?:Shared)?Worker|serviceWorker\s*\.\s*register|\bnew\s+URL)"""
    r"""\s*\(\s*(['"`])([^'"`$\s]*)\1"""
    # static imports, at the start of a line: import … from "x", import "x"
    r"""|^[ \t]*import\s[^;'"`]*?\bfrom\s*(['"])([^'"\s]*)\3|^[ \t]*import\s*(['"])([^'"\s]*)\5""",
    re.MULTILINE,
)
IMPORT_META = re.compile(r"\s*,\s*import\.meta\.url")
# Addresses that load nothing from anywhere.
INERT = ("data:", "blob:", "about:", "javascript:", "mailto:", "#")


def classify(url):
    """What is wrong with a loaded address, or None when it is relative (or inert)."""
    url = url.strip()
    if not url or url.startswith(INERT):
        return None
    parts = urlsplit(url)
    if parts.scheme or parts.netloc:
        return "loads from another host"
    if url.startswith("/"):
        return "is an absolute path (the book must work from a sub-path)"
    return None


def resolves(base_dir, url, root):
    """Whether a relative address, read from base_dir, names a file inside root."""
    path = unquote(urlsplit(url.strip()).path)
    if not path:
        return True  # "?query" or "#fragment" alone: the file itself
    target = (base_dir / path).resolve()
    if root not in target.parents and target != root:
        return False
    if target.is_dir():
        target = target / "index.html"
    return target.is_file()


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.loads = []  # addresses the page loads
        self.links = []  # addresses a reader follows
        self.base = None
        self.in_style = False
        self.styles = []

    def handle_starttag(self, tag, attrs):
        attrs = {name: value or "" for name, value in attrs}
        if tag == "base" and "href" in attrs:
            self.base = attrs["href"]
        if tag == "style":
            self.in_style = True
        if "style" in attrs:
            self.styles.append(attrs["style"])
        if tag == "a" and "href" in attrs:
            self.links.append(attrs["href"])
        if tag == "link" and LINK_NAVIGATION & set(attrs.get("rel", "").lower().split()):
            self.links.append(attrs.get("href", ""))
            return
        for name in LOADS.get(tag, []):
            value = attrs.get(name)
            if not value:
                continue
            if name == "srcset":
                self.loads += [item.split()[0] for item in value.split(",") if item.strip()]
            else:
                self.loads.append(value)

    def handle_endtag(self, tag):
        if tag == "style":
            self.in_style = False

    def handle_data(self, data):
        if self.in_style:
            self.styles.append(data)


def check(root):
    root = Path(root).resolve()
    if not (root / "index.html").is_file():
        sys.exit(f"error: no index.html in {root}; build the book first (bash book/build.sh)")
    problems = []

    def judge(path, url, base_dir):
        wrong = classify(url)
        if wrong is None and url.strip() and not url.strip().startswith(INERT):
            if not resolves(base_dir, url, root):
                wrong = "names no file of the built book"
        if wrong:
            problems.append(f"{path.relative_to(root)}: {url.strip()} {wrong}")

    for path in sorted(root.rglob("*.html")):
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        page.close()
        base_dir = path.parent
        if page.base is not None:
            if path.name == "404.html":
                pass  # the site's path, served at any depth: addresses are read from its folder
            else:
                judge(path, page.base, path.parent)
        for url in page.loads:
            judge(path, url, base_dir)
        for style in page.styles:
            for m in CSS_URL.finditer(style):
                judge(path, m.group(2) or m.group(4) or "", base_dir)
        for url in page.links:
            if url.strip().startswith("/") and not url.strip().startswith("//"):
                problems.append(f"{path.relative_to(root)}: link {url.strip()} is an absolute path (the book must work from a sub-path)")
    for path in sorted(root.rglob("*.css")):
        for m in CSS_URL.finditer(path.read_text(encoding="utf-8")):
            judge(path, m.group(2) or m.group(4) or "", path.parent)
    for path in sorted(root.rglob("*.js")) + sorted(root.rglob("*.mjs")):
        text = path.read_text(encoding="utf-8")
        for m in JS_LOADS.finditer(text):
            url = m.group(2) or m.group(4) or m.group(6) or ""
            wrong = classify(url)
            # Module imports and new URL(…, import.meta.url) are read from the script's own folder;
            # other relative addresses from the page that runs the script, which is not known here.
            own_folder = m.group(0).lstrip().startswith("import") or (
                m.group(0).startswith("new") and IMPORT_META.match(text, m.end()))
            if not wrong and url and own_folder and not resolves(path.parent, url, root):
                wrong = "names no file of the built book"
            if wrong:
                problems.append(f"{path.relative_to(root)}: {url} {wrong}")
    return problems


def main(root):
    problems = check(root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        sys.exit(f"error: the built book is not self-contained ({len(problems)} problems above)")
    print(f"{root}: self-contained: every loaded address is relative and names a file of the book")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "book/book")
