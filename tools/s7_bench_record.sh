#!/usr/bin/env bash
# Measures what stage 7's chapter shows of the KV cache's speed, and writes the record its table and
# chart are drawn from:
#   bash tools/s7_bench_record.sh > book/src/generated/s7_bench.txt
#   cargo run --release --example book_figures -- --quick     (redraws the table and chart from it)
# Runs `s7_variants --bench` (each generation timed three times, the median kept) at 1 thread and
# then at 2.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --example s7_variants
crate=target/release/examples/s7_variants
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "# Stage 7's KV cache: generation with it and without it, s7_variants --bench."
echo "# Machine: $cpu, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, shared with other jobs."
echo "# Written by: bash tools/s7_bench_record.sh, from $(date -u '+%Y-%m-%d %H:%M') UTC."
for threads in 1 2; do
    echo "#   $crate --bench --threads $threads"
    "$crate" --bench --threads "$threads"
done
echo "# Ended $(date -u '+%Y-%m-%d %H:%M') UTC."
