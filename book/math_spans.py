#!/usr/bin/env python3
"""An mdBook preprocessor that carries the formulas through translation unchanged.

The Chinese edition is made by mdbook-gettext, which parses each chapter as Markdown and writes it out
again with the translated messages. That round trip is not kind to TeX: Markdown reads `\\,` as an escaped
comma and drops the backslash, and the writer escapes `_` and `[` where Markdown might read them. So the
formulas are hidden in code spans, whose text Markdown keeps byte for byte, before gettext sees them, and
brought back before mdbook-katex renders them:

    protect  `\\( q = x^{(2)} \\)` for \\( q = x^{(2)} \\), on one line   (before gettext; also for xgettext,
             so the catalogue's messages show each formula exactly as the translation must keep it)
    restore  the formula again, without the backticks                    (after gettext, before katex)

A formula's line breaks become spaces, which TeX does not see. Fenced code blocks and code spans are left
alone. mdBook calls it as `python3 math_spans.py MODE supports RENDERER` (every renderer is supported) and
then as `python3 math_spans.py MODE` with the book as JSON on standard input, [context, book]; it prints the
book back.
"""

import json
import re
import sys

OPEN = {"\\\\(": "\\\\)", "\\\\[": "\\\\]"}
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A protected formula as the Markdown writer puts it back: one code span holding \\( … \\) or \\[ … \\].
PROTECTED = re.compile(r"`(\\\\\((?:(?!`).)*?\\\\\)|\\\\\[(?:(?!`).)*?\\\\\])`")


def outside_fences(content, transform):
    """Applies `transform` to each stretch of `content` that is not a fenced code block."""
    out, prose, fence = [], [], None
    for line in content.splitlines(keepends=True):
        m = FENCE.match(line)
        if fence is None and m:
            out.append(transform("".join(prose)))
            prose = []
            fence = m.group(1)
            out.append(line)
        elif fence is not None:
            out.append(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):]:
                fence = None
        else:
            prose.append(line)
    out.append(transform("".join(prose)))
    return "".join(out)


def protect_prose(text):
    out, i = [], 0
    while i < len(text):
        if text[i] == "`":
            # A code span: copy it whole, up to the closing run of as many backticks.
            run = len(text[i:]) - len(text[i:].lstrip("`"))
            close = re.compile(r"(?<!`)" + "`" * run + r"(?!`)").search(text, i + run)
            end = close.end() if close else i + run
            out.append(text[i:end])
            i = end
            continue
        opener = text[i : i + 3]
        if opener in OPEN:
            close = text.find(OPEN[opener], i + 3)
            if close >= 0:
                formula = text[i : close + 3]
                out.append("`" + re.sub(r"\s*\n\s*", " ", formula) + "`")
                i = close + 3
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def restore_prose(text):
    return PROTECTED.sub(lambda m: m.group(1), text)


def walk(items, transform):
    for item in items:
        chapter = item.get("Chapter") if isinstance(item, dict) else None
        if chapter:
            chapter["content"] = outside_fences(chapter["content"], transform)
            walk(chapter["sub_items"], transform)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in ("protect", "restore"):
        sys.exit("usage: math_spans.py protect|restore")
    if len(sys.argv) > 2 and sys.argv[2] == "supports":
        sys.exit(0)
    _context, book = json.load(sys.stdin)
    walk(book["items"], protect_prose if mode == "protect" else restore_prose)
    json.dump(book, sys.stdout)
