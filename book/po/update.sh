#!/usr/bin/env bash
# Brings the translations (book/po/*.po) up to date with the English text: run it after changing the
# English chapters, then translate what it reports, and commit the catalogue with the English change.
#
# It extracts the English messages with mdbook-xgettext (without line numbers, so that an edit elsewhere
# in a chapter does not touch the catalogue) and merges them into each catalogue with GNU msgmerge: a
# message whose English changed keeps its old translation marked fuzzy, a new one comes in empty, and one
# the English no longer has is dropped. Needs mdbook-i18n-helpers (see the README) and the gettext tools
# (`apt-get install gettext`, `brew install gettext`).
set -euo pipefail
cd "$(dirname "$0")/../.."

for tool in mdbook mdbook-xgettext msgmerge msgattrib; do
    command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool is missing (see the comment at the top of $0)" >&2; exit 1; }
done

pot_dir=$(mktemp -d)
trap 'rm -rf "$pot_dir"' EXIT
MDBOOK_OUTPUT='{"xgettext": {"granularity": 0}}' mdbook build book -d "$pot_dir" >"$pot_dir/log" 2>&1 \
    || { cat "$pot_dir/log" >&2; exit 1; }

for po in book/po/*.po; do
    msgmerge --quiet --update --backup=none "$po" "$pot_dir/messages.pot"
    msgattrib --no-obsolete --output-file="$po" "$po"
    msgfmt --check --statistics --output-file=/dev/null "$po"
done

# What is left to translate (nothing, when the check passes).
python3 .ci/check_translation.py || true
