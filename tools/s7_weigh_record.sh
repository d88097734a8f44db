#!/usr/bin/env bash
# Trains the sequel's fullest model and each of stage 7's variants on Tiny Shakespeare with the
# tutorial's recipe, for 3,000 steps and for the two epochs, and writes the record the chapter's
# table is drawn from:
#   bash tools/s7_weigh_record.sh > book/src/generated/s7_weighed.txt
#   cargo run --release --example book_figures -- --quick     (redraws the table from it)
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --example s7_variants
crate=target/release/examples/s7_variants
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "# Stage 7's variants weighed: s7_variants --weigh, the tutorial's recipe, seed 42, one thread."
echo "# Machine: $cpu, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, shared with other jobs."
echo "# Written by: bash tools/s7_weigh_record.sh, from $(date -u '+%Y-%m-%d %H:%M') UTC."
echo "#   $crate --weigh --max-steps 3000"
"$crate" --weigh --max-steps 3000
echo "#   $crate --weigh"
"$crate" --weigh
echo "# Ended $(date -u '+%Y-%m-%d %H:%M') UTC."
