#!/usr/bin/env python3
"""An mdBook preprocessor that runs after katex and keeps Markdown away from the rendered formulas.

mdbook-katex replaces each formula with MathML before Markdown is parsed, and Markdown then reads the text
between the MathML tags as Markdown: the TeX source that KaTeX keeps in <annotation> holds `_`, `*`, `\\`
and `|`, and a pair of underscores there becomes <em>, which the browser's parser lets out of the formula
onto the page. This writes every such character in a formula's text as a character reference (`_` as
`&#95;`), which Markdown passes through unchanged and the browser reads back as the same character.

mdBook calls it as `python3 protect_math.py supports RENDERER` (every renderer is supported) and then with
the book as JSON on standard input, [context, book]; it prints the book back.
"""

import json
import re
import sys

FORMULA = re.compile(r"<math\b.*?</math>", re.DOTALL)
TEXT = re.compile(r">([^<]+)<")
# The characters that mean something to Markdown inside a paragraph or a table cell. KaTeX has already
# written &, <, >, " and ' as references.
MARKDOWN = re.compile(r"[\\`*_\[\]!|~]")


def protect_text(match):
    return ">" + MARKDOWN.sub(lambda c: f"&#{ord(c.group())};", match.group(1)) + "<"


def protect(content):
    return FORMULA.sub(lambda formula: TEXT.sub(protect_text, formula.group()), content)


def protect_items(items):
    for item in items:
        chapter = item.get("Chapter") if isinstance(item, dict) else None
        if chapter:
            chapter["content"] = protect(chapter["content"])
            protect_items(chapter["sub_items"])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "supports":
        sys.exit(0)
    _context, book = json.load(sys.stdin)
    protect_items(book["items"])
    json.dump(book, sys.stdout)
