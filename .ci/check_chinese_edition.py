#!/usr/bin/env python3
"""Checks that what the catalogue cannot translate is Chinese in the Chinese edition too.

Usage: python3 .ci/check_chinese_edition.py [BUILT_ZH_CN_DIR]
       (check_translation.py calls it; with no directory it builds the Chinese edition into a temporary one)

mdbook-gettext translates the chapters' own text, but not what they pull in or what mdBook writes around
them. This fails, with one line naming the file and the fix, when
- a generated Markdown file a chapter includes (book/src/generated/X.md) has no Chinese counterpart
  book/src/generated/zh-CN/X.md, the catalogue's translation of the include line does not point to it, or
  the counterpart is the English file unchanged although that has words in it (not only code);
- a picture book/src/img/X.svg has no book/src/img/zh-CN/X.svg, the translated image line does not show
  it (in the catalogue and in the built pages), or its text is not Chinese;
- book/theme/play-labels.js, when it exists, lacks a Chinese label for an English one, has other keys in
  one language than in the other, or gives a Chinese label equal to the English one (unless it is only
  code, punctuation or numbers);
- a built Chinese page shows a word of mdBook's interface (a button's title, a menu's label, the search
  bar's placeholder) that book/theme/interface-zh.js does not translate, or the table there translates a
  word mdBook no longer writes; and, when Chromium is installed, when a built Chinese page still shows one
  of those English words after its scripts have run.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "book" / "src"
PO = ROOT / "book" / "po" / "zh-CN.po"
INTERFACE = ROOT / "book" / "theme" / "interface-zh.js"
PLAY_LABELS = ROOT / "book" / "theme" / "play-labels.js"
CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef\u3000-\u303f]")
INCLUDE = re.compile(r"\{\{#include\s+(generated/[^}\s:]+\.md)\s*\}\}")
IMAGE = re.compile(r"!\[[^\]]*\]\((img/[^)\s]+\.svg)\)")
# mdBook's interface words that are names, the same in every language.
NAMES = {"Rust", "Ayu"}
# Where a page names what a control does.
UI_ATTRIBUTES = ("title", "aria-label", "placeholder")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_translation import parse_po  # noqa: E402


def rel(path):
    return Path(path).relative_to(ROOT) if Path(path).is_absolute() else Path(path)


def translations():
    """The catalogue's msgid → msgstr."""
    return {e["msgid"]: e.get("msgstr", "") for e in parse_po(PO) if e["msgid"]}


def outside_code(markdown):
    """The lines of `markdown` outside fenced code blocks, code spans taken out."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(lines)


def has_words(text):
    return re.search(r"[A-Za-z]{2,}", text) is not None


def check_generated(catalogue):
    problems = []
    for chapter in sorted(SRC.glob("*.md")):
        for path in INCLUDE.findall(chapter.read_text(encoding="utf-8")):
            english = SRC / path
            chinese = SRC / "generated" / "zh-CN" / Path(path).relative_to("generated")
            line = f"{{{{#include {path}}}}}"
            wanted = f"{{{{#include {chinese.relative_to(SRC)}}}}}"
            if not chinese.exists():
                problems.append(f"{rel(chinese)}: missing, the Chinese copy of {rel(english)} that "
                                f"{chapter.name} includes; run `cargo run --release --example ablation -- --render`")
            elif english.exists() and chinese.read_text(encoding="utf-8") == english.read_text(encoding="utf-8") \
                    and has_words(outside_code(english.read_text(encoding="utf-8"))):
                problems.append(f"{rel(chinese)}: the same as the English {rel(english)}; draw it in Chinese "
                                f"words (src/lang.rs) and render it again")
            if not any(line in msgid and wanted in msgstr for msgid, msgstr in catalogue.items()):
                problems.append(f"{rel(PO)}: translate `{line}` ({chapter.name}) as `{wanted}`")
    return problems


def svg_text(svg):
    return " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", svg))


def check_images(catalogue):
    problems = []
    shown = {}  # image path → the translated line that shows it
    for msgid, msgstr in catalogue.items():
        for path in IMAGE.findall(msgid):
            shown[path] = msgstr
    for english in sorted((SRC / "img").glob("*.svg")):
        chinese = SRC / "img" / "zh-CN" / english.name
        path, wanted = f"img/{english.name}", f"img/zh-CN/{english.name}"
        if not chinese.exists():
            problems.append(f"{rel(chinese)}: missing, the Chinese copy of {rel(english)}; run "
                            f"`cargo run --release --example book_figures` (or the ablation example's --render)")
        elif not CJK.search(svg_text(chinese.read_text(encoding="utf-8"))):
            problems.append(f"{rel(chinese)}: its text has no Chinese; draw it in Chinese words (src/lang.rs)")
        if path in shown and f"]({wanted})" not in shown[path]:
            problems.append(f"{rel(PO)}: the translation of the image line of {path} must show {wanted}")
    return problems


def object_after_equals(path):
    """The strict JSON between the first `=` and the final `;` of a script like `window.X = {…};`."""
    text = path.read_text(encoding="utf-8")
    start, end = text.find("="), text.rfind(";")
    if start < 0 or end < start:
        raise ValueError("expected `window.PLAY_LABELS = { … };`")
    return json.loads(text[start + 1:end])


def only_code(text):
    """True for a label with nothing to translate: code (`…`, a --flag, an identifier with _ or ::, a
    {placeholder}), punctuation, numbers, symbols."""
    return not has_words(re.sub(r"`[^`]*`|--[a-z-]+|\{[^}]*\}|\S*(_|::|\d)\S*", "", text))


def check_play_labels():
    if not PLAY_LABELS.exists():
        return []
    where = rel(PLAY_LABELS)
    form = '`window.PLAY_LABELS = {"en": {…}, "zh-CN": {…}};`, strict JSON between `=` and `;`'
    try:
        labels = object_after_equals(PLAY_LABELS)
    except ValueError as e:
        return [f"{where}: not {form} ({e})"]
    english, chinese = (labels.get(k) if isinstance(labels, dict) else None for k in ("en", "zh-CN"))
    if not isinstance(english, dict) or not isinstance(chinese, dict):
        return [f"{where}: needs both an \"en\" and a \"zh-CN\" object of labels: {form}"]
    problems = []
    for key in sorted(set(english) - set(chinese)):
        problems.append(f"{where}: \"zh-CN\" lacks the key {key!r}; add its Chinese label")
    for key in sorted(set(chinese) - set(english)):
        problems.append(f"{where}: \"zh-CN\" has the key {key!r}, which \"en\" lacks; remove it or add it to \"en\"")
    for key in sorted(set(english) & set(chinese)):
        en, zh = english[key], chinese[key]
        if not isinstance(zh, str) or not zh.strip():
            problems.append(f"{where}: \"zh-CN\" {key!r} is empty; translate {en!r}")
        elif zh == en and not only_code(en):
            problems.append(f"{where}: \"zh-CN\" {key!r} is still the English {en!r}; translate it")
    return problems


def interface_words():
    text = INTERFACE.read_text(encoding="utf-8")
    body = re.search(r"// BEGIN WORDS\s*var WORDS = (\{.*?\});\s*// END WORDS", text, re.S)
    if not body:
        sys.exit(f"error: {rel(INTERFACE)}: no `var WORDS = {{…}};` between // BEGIN WORDS and // END WORDS")
    return json.loads(body.group(1))


class Interface(HTMLParser):
    """The words of mdBook's interface in a page: its controls' titles and labels, and the theme list."""

    def __init__(self, everywhere=False):
        super().__init__(convert_charrefs=True)
        self.words, self.in_main, self.theme_button = set(), 0, False
        self.everywhere = everywhere  # the chapters' own controls too (the copy buttons)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "main":
            self.in_main += 1
        if self.everywhere or not self.in_main:
            self.words.update(v.strip() for k, v in attrs.items() if k in UI_ATTRIBUTES and v and v.strip())
        self.theme_button = tag == "button" and "theme" in (attrs.get("class") or "").split()

    def handle_endtag(self, tag):
        if tag == "main" and self.in_main:
            self.in_main -= 1
        self.theme_button = False

    def handle_data(self, data):
        if self.theme_button and data.strip():
            self.words.add(data.strip())


def page_words(html, everywhere=False):
    parser = Interface(everywhere)
    parser.feed(html)
    return parser.words


def english(word):
    return has_words(word) and not CJK.search(word)


def check_pages(built):
    words = interface_words()
    problems = []
    pages = sorted(built.glob("*.html"))
    if not pages:
        return [f"{built}: no built pages; build the Chinese edition first"]
    scripts = "".join(p.read_text(encoding="utf-8") for p in built.glob("*.js"))
    everything = scripts + "".join(p.read_text(encoding="utf-8") for p in pages)
    untranslated = {}  # word → the pages that show it
    for page in pages:
        html = page.read_text(encoding="utf-8")
        if 'lang="zh-CN"' not in html:
            problems.append(f"{page}: not a Chinese page (<html lang=\"zh-CN\">); build with MDBOOK_BOOK__LANGUAGE=zh-CN")
            continue
        for word in page_words(html):
            if english(word) and word not in words and word not in NAMES:
                untranslated.setdefault(word, []).append(page.name)
    for page in pages:
        for picture in sorted(set(re.findall(r'src="(img/[^/"]+\.svg)"', page.read_text(encoding="utf-8")))):
            problems.append(f"{page.name}: shows the English picture {picture}; its translated line must show "
                            f"{picture.replace('img/', 'img/zh-CN/')}")
    for word, shown_on in sorted(untranslated.items()):
        more = f" and {len(shown_on) - 1} more pages" if len(shown_on) > 1 else ""
        problems.append(f"{shown_on[0]}{more}: mdBook's {word!r} has no Chinese; add it to WORDS in {rel(INTERFACE)}")
    for word in words:
        if word not in everything:
            problems.append(f"{rel(INTERFACE)}: mdBook no longer writes {word!r}; update the table")
    return problems + check_live_pages(built, words)


def chromium():
    return next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)


def check_live_pages(built, words):
    """Opens a few Chinese pages in headless Chromium and looks for the table's English words after the
    scripts have run."""
    browser = chromium()
    if browser is None:
        print("note: no Chromium, so the Chinese interface was checked in the built pages only "
              "(apt-get install chromium checks it as a reader sees it)", file=sys.stderr)
        return []
    problems = []
    # (Not 404.html: it loads its scripts from the server's root, which a file:// address does not have.)
    for name in ("index.html", "s5_beyond.html"):
        page = built / name
        if not page.exists():
            continue
        with tempfile.TemporaryDirectory() as profile:
            run = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                                  "--no-first-run", "--disable-background-networking", "--disable-component-update",
                                  "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=3000",
                                  "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
        dom = run.stdout
        if 'lang="zh-CN"' not in dom:
            problems.append(f"{page}: Chromium could not open it ({run.stderr.strip()[-200:]})")
            continue
        shown = page_words(dom, everywhere=True)
        for word in sorted(words):
            if word in shown:
                problems.append(f"{name}: still shows {word!r} after {rel(INTERFACE)} has run; "
                                f"check that book/book.toml's additional-js lists it")
    return problems


def build_chinese(destination):
    env = dict(os.environ, MDBOOK_BOOK__LANGUAGE="zh-CN")
    run = subprocess.run(["mdbook", "build", "book", "-d", destination], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"error: building the Chinese edition failed:\n{run.stdout}{run.stderr}")
    return Path(destination)


def main(built=None):
    catalogue = translations()
    problems = check_generated(catalogue) + check_images(catalogue) + check_play_labels()
    if built:
        problems += check_pages(Path(built).resolve())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            problems += check_pages(build_chinese(tmp))
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        sys.exit("error: part of the Chinese edition is still in English (see above)")
    print("the Chinese edition's generated tables, pictures, panel labels and mdBook interface are Chinese")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
