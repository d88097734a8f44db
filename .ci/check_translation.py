#!/usr/bin/env python3
"""Checks that every translation of the book (book/po/*.po) is complete and current.

Usage: python3 .ci/check_translation.py      (from anywhere; needs mdbook and mdbook-xgettext)

It extracts the English text's messages afresh, the way book/po/update.sh does (mdbook-xgettext, no line
numbers), and fails, naming the messages, when a catalogue
- lacks a message of the English text (new or changed English that was not merged in: run
  book/po/update.sh, then translate what it leaves empty or marks fuzzy);
- has a message the English text no longer has (run book/po/update.sh, which drops it);
- has an entry that is untranslated, or marked fuzzy (mdbook-gettext shows such an entry in English);
- changes a formula: each `\\( … \\)` and `\\[ … \\]` of a message (the catalogue shows them in backticks,
  see book/math_spans.py) must stand in its translation exactly as written;
- ends a message with a line break where the English does not, or the other way round (code comments).

Then it runs check_chinese_edition.py, which checks what the catalogue cannot translate: the generated
tables and the pictures the chapters show, the panels' labels and mdBook's own interface.

The .po files are read here directly, without the GNU gettext tools.
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PO_DIR = ROOT / "book" / "po"
FORMULA = re.compile(r"`\\\\\(.*?\\\\\)`|`\\\\\[.*?\\\\\]`")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def unquote(text, where):
    """The value of one quoted PO string, `"…"`."""
    text = text.strip()
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise ValueError(f"{where}: not a quoted string: {text}")
    out, i, body = [], 0, text[1:-1]
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(ESCAPES.get(body[i + 1], "\\" + body[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_po(path):
    """The entries of a .po or .pot file: dicts with msgctxt, msgid, msgstr, fuzzy; obsolete ones left out."""
    entries, entry, field = [], None, None

    def finish():
        if entry is not None and "msgid" in entry:
            entries.append(entry)

    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path}:{number}"
        stripped = line.strip()
        if not stripped:
            finish()
            entry, field = None, None
            continue
        if stripped.startswith("#~"):
            continue
        if entry is None:
            entry = {"msgctxt": None, "fuzzy": False, "line": number}
        if stripped.startswith("#,"):
            entry["fuzzy"] |= "fuzzy" in [flag.strip() for flag in stripped[2:].split(",")]
        elif stripped.startswith("#"):
            continue
        elif stripped.startswith('"'):
            if field is None:
                raise ValueError(f"{where}: a string continues no field")
            entry[field] += unquote(stripped, where)
        else:
            keyword, _, rest = stripped.partition(" ")
            if keyword.startswith("msgstr["):
                keyword = "msgstr"  # plural forms: the book has none, and one form is enough here
            if keyword not in ("msgctxt", "msgid", "msgid_plural", "msgstr"):
                raise ValueError(f"{where}: unknown line: {line}")
            field = keyword
            entry[field] = unquote(rest, where)
    finish()
    return entries


def extract(destination):
    """Extracts the English text's messages into destination/messages.pot, as book/po/update.sh does."""
    env = dict(os.environ, MDBOOK_OUTPUT='{"xgettext": {"granularity": 0}}')
    run = subprocess.run(["mdbook", "build", "book", "-d", destination], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"error: extracting the book's messages failed:\n{run.stdout}{run.stderr}")
    return Path(destination) / "messages.pot"


def short(msgid):
    one_line = msgid.replace("\n", "⏎")
    return one_line if len(one_line) <= 100 else one_line[:97] + "…"


def check(po_path, template):
    problems = []
    entries = [e for e in parse_po(po_path) if e["msgid"]]
    have = {(e["msgctxt"], e["msgid"]): e for e in entries}
    wanted = [(e["msgctxt"], e["msgid"]) for e in template if e["msgid"]]
    for key in wanted:
        if key not in have:
            problems.append(f"missing (the English text has it, the catalogue does not): {short(key[1])!r}")
    wanted_set = set(wanted)
    for e in entries:
        key, where = (e["msgctxt"], e["msgid"]), f"{po_path.name}:{e['line']}"
        if key not in wanted_set:
            problems.append(f"{where}: stale (the English text no longer has it): {short(e['msgid'])!r}")
            continue
        if not e.get("msgstr"):
            problems.append(f"{where}: untranslated: {short(e['msgid'])!r}")
            continue
        if e["fuzzy"]:
            problems.append(f"{where}: fuzzy (check the translation, then remove the fuzzy flag): "
                            f"{short(e['msgid'])!r}")
        for formula in FORMULA.findall(e["msgid"]):
            if formula not in e["msgstr"]:
                problems.append(f"{where}: the translation changes or drops the formula {formula}")
        if e["msgid"].endswith("\n") != e["msgstr"].endswith("\n"):
            problems.append(f"{where}: the translation and the English differ in a final line break")
    return len(wanted), problems


def main():
    catalogues = sorted(PO_DIR.glob("*.po"))
    if not catalogues:
        sys.exit(f"error: no catalogue in {PO_DIR}")
    with tempfile.TemporaryDirectory() as tmp:
        template = parse_po(extract(tmp))
    failed = False
    for po_path in catalogues:
        count, problems = check(po_path, template)
        if problems:
            failed = True
            for problem in problems[:50]:
                print(f"{po_path.relative_to(ROOT)}: {problem}", file=sys.stderr)
            if len(problems) > 50:
                print(f"{po_path.relative_to(ROOT)}: … and {len(problems) - 50} more", file=sys.stderr)
        else:
            print(f"{po_path.relative_to(ROOT)}: all {count} messages of the English text translated, none fuzzy")
    if failed:
        sys.exit("error: a translation is incomplete or out of date; run `bash book/po/update.sh`, translate "
                 "the entries it reports, and commit the catalogue with the English change")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import check_chinese_edition

    check_chinese_edition.main()


if __name__ == "__main__":
    main()
