#!/usr/bin/env bash
# Trains the tutorial's model and each of stage 7's variants with the tutorial's recipe for its two
# epochs, and prints their heads' previous-token, duplicate-token and induction scores on stage 8's
# probes: the table of stage 8's section on the book's other models.
#   bash tools/s8_book_models_record.sh > book/src/generated/s8_book_models.txt
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --example s8_heads
crate=target/release/examples/s8_heads
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
family=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
model=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
echo "# The book's other models, their heads on repeated random text: s8_heads --book-models, seed 42."
echo "# Machine: $cpu (family $family, model $model), $(nproc) cores; the scores do not depend on it. Written by: bash tools/s8_book_models_record.sh, from $(date -u '+%Y-%m-%d %H:%M') UTC."
echo "#   $crate --book-models --threads 2"
"$crate" --book-models --threads 2
echo "# Ended $(date -u '+%Y-%m-%d %H:%M') UTC."
