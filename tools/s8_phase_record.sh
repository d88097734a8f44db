#!/usr/bin/env bash
# Trains stage 8's study and writes the record its tables and figures are drawn from:
#   bash tools/s8_phase_record.sh [THREADS]     (2 threads unless given; the bits do not depend on it)
#   cargo run --release --example book_figures -- --quick     (redraws the tables and figures from it)
# book/src/generated/s8_phase.txt: `s8_heads --phase`, one line per probe of each model, then the
# seconds the whole study took. Written to a temporary file first and moved into place at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}

cargo build --release --quiet --example s8_heads
crate=target/release/examples/s8_heads
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
out=book/src/generated/s8_phase.txt
start=$(date +%s)
{
    echo "# Stage 8's study: each model probed every 100 steps, s8_heads --phase."
    echo "# Machine: $cpu, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB."
    echo "# Written by: bash tools/s8_phase_record.sh $threads, from $(date -u '+%Y-%m-%d %H:%M') UTC."
    echo "#   $crate --phase --threads $threads"
    "$crate" --phase --threads "$threads"
    echo "# Ended $(date -u '+%Y-%m-%d %H:%M') UTC: $(( $(date +%s) - start )) s for the whole study."
} > "$out.tmp"
mv "$out.tmp" "$out"
