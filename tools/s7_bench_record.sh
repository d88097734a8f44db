#!/usr/bin/env bash
# Measures what stage 7's chapter shows of the KV cache's speed, and writes the two records its
# tables and charts are drawn from:
#   bash tools/s7_bench_record.sh [ROUNDS]     (3 rounds unless given; run it with nothing else running)
#   cargo run --release --example book_figures -- --quick     (redraws the tables and charts from them)
# book/src/generated/s7_bench.txt: `s7_variants --bench` at 1 thread and then at 2, every round's
# line kept (the tables show the median and the range). book/src/generated/s7_rolling.txt:
# `s7_variants --bench --rolling` at 1 thread. Each record is written to a temporary file first and
# moved into place when its run has ended.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}

cargo build --release --quiet --example s7_variants
crate=target/release/examples/s7_variants
source tools/machine.sh
header() {
    echo "# $1"
    machine_lines
    echo "# Written by: bash tools/s7_bench_record.sh $rounds, from $(date -u '+%Y-%m-%d %H:%M') UTC."
}

out=book/src/generated/s7_bench.txt
{
    header "Stage 7's KV cache: generation with it and without it, s7_variants --bench."
    for threads in 1 2; do
        echo "#   $crate --bench --threads $threads --repeat $rounds"
        "$crate" --bench --threads "$threads" --repeat "$rounds"
    done
    echo "# Ended $(date -u '+%Y-%m-%d %H:%M') UTC."
} > "$out.tmp"
mv "$out.tmp" "$out"

out=book/src/generated/s7_rolling.txt
{
    header "Stage 7's rolling cache far past the context, s7_variants --bench --rolling."
    echo "#   $crate --bench --rolling --threads 1 --repeat $rounds"
    "$crate" --bench --rolling --threads 1 --repeat "$rounds"
    echo "# Ended $(date -u '+%Y-%m-%d %H:%M') UTC."
} > "$out.tmp"
mv "$out.tmp" "$out"
