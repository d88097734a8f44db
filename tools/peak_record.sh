#!/usr/bin/env bash
# Measures the product kernel against this core's own FMA peak, shape by shape, and writes the record
# Appendix B shows:
#   bash tools/peak_record.sh [RUNS] > book/src/generated/peak_shapes.txt
# Each run is `s5_gpt --peak --threads 1`: the peak (independent FMA chains in the widest vectors the
# core has), one 1024³ product, and each product of a training step of nanoGPT's CPU configuration,
# with its share of the peak. Run it with nothing else running; the record keeps every run.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-5}
cargo build --release --quiet --example s5_gpt
crate=target/release/examples/s5_gpt

source tools/machine.sh
echo "# The product kernel's share of this core's FMA peak, shape by shape: s5_gpt --peak."
machine_lines
echo "# Written by: bash tools/peak_record.sh $runs, from $(date -u '+%Y-%m-%d %H:%M') UTC."
echo "# Each run: $crate --peak --threads 1"
for run in $(seq "$runs"); do
    echo
    echo "## run $run"
    "$crate" --peak --threads 1
done
