#!/usr/bin/env bash
# Each fuzz target's seed corpus, made with the crate, in fuzz/corpus/<target>/ (or DIR/<target>/):
# `bash fuzz/seeds.sh [DIR]`. Each target's own binary writes its seeds (src/seeds.rs), so this
# builds nothing that fuzzing does not build anyway. The seeds are never committed (fuzz/.gitignore).
set -euo pipefail
cd "$(dirname "$0")"
out=$(realpath -m "${1:-corpus}")
for target in $(cargo +nightly fuzz list); do
    FUZZ_WRITE_SEEDS=$out cargo +nightly fuzz run "$target" -- -runs=0
done
