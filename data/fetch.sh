#!/bin/sh
# Downloads Tiny Shakespeare (1,115,394 characters) for stage 5 and checks its sha256.
# Usage: sh data/fetch.sh        (from the crate root or from anywhere)
set -eu

URL="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
DIR=$(cd "$(dirname "$0")" && pwd)
OUT="$DIR/tinyshakespeare.txt"

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        shasum -a 256 "$1" | cut -d' ' -f1
    fi
}

if [ -f "$OUT" ] && [ "$(sha256_of "$OUT")" = "$SHA256" ]; then
    echo "$OUT is already there and intact."
    exit 0
fi

TMP="$OUT.part"
trap 'rm -f "$TMP"' EXIT
if command -v curl >/dev/null 2>&1; then
    curl -fsSL "$URL" -o "$TMP"
else
    wget -q -O "$TMP" "$URL"
fi

GOT=$(sha256_of "$TMP")
if [ "$GOT" != "$SHA256" ]; then
    echo "error: downloaded file has sha256 $GOT, expected $SHA256" >&2
    exit 1
fi
mv "$TMP" "$OUT"
echo "saved $OUT"
