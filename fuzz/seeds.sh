#!/usr/bin/env bash
# Writes each fuzz target's seed corpus, made with the crate, into fuzz/corpus/<target>/:
# `bash fuzz/seeds.sh [cargo fuzz run options, e.g. -s none]`. Each target's own binary writes its
# seeds and runs each once (fuzz/src/seeds.rs), so this builds nothing that fuzzing does not build
# anyway. Needs nightly Rust and cargo-fuzz. The seeds are never committed (fuzz/.gitignore).
set -euo pipefail
cd "$(dirname "$0")"
for target in $(cargo +nightly fuzz list); do
    if ! out=$(FUZZ_WRITE_SEEDS=$PWD/corpus cargo +nightly fuzz run "$@" "$target" -- -runs=0 2>&1); then
        echo "$out" >&2
        echo "error: fuzz target $target could not write its seeds (above)" >&2
        exit 1
    fi
    grep "^$target: " <<<"$out"
done
