#!/usr/bin/env bash
# Measures what stage 6's chapter shows of attention's cost, the crate and PyTorch run alternately in the
# same minutes, and writes the record the chapter's tables and charts are drawn from:
#   bash tools/s6_bench_record.sh [ROUNDS] > book/src/generated/s6_bench.txt
#   cargo run --release --example book_figures -- --quick     (redraws the tables and charts from it)
# Each round runs, at 1 thread and then at 2: the crate's `s6_flash --bench` at each length, PyTorch's
# SDPA at the same lengths (tools/torch_attention_bench.py), then both at rasbt's module shapes. The
# record keeps every round's lines; the book shows each figure's median over the rounds.
# Needs PyTorch in a venv: TORCH_PYTHON (default ~/torch/bin/python; see tools/torch_attention_bench.py).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-3}
python=${TORCH_PYTHON:-$HOME/torch/bin/python}
[ -x "$python" ] || { echo "error: no PyTorch at $python; set TORCH_PYTHON or see tools/torch_attention_bench.py" >&2; exit 1; }
cargo build --release --quiet --example s6_flash
crate=target/release/examples/s6_flash
torch=(tools/torch_attention_bench.py)

# The exact form runs only at the shorter lengths (it computes every score twice, and, without a
# kernel of its own in the fast layer, runs the lesson's code); naive stops where its T × T matrices
# would not fit. S6_SHORT and S6_LONG change the lengths (S6_LONG may be empty).
short=${S6_SHORT:-256,1024}
long=${S6_LONG:-4096,16384}

source tools/machine.sh
echo "# Stage 6's cost of attention as T grows: s6_flash --bench and PyTorch, run alternately."
machine_lines
echo "# PyTorch $("$python" -c 'import torch; print(torch.__version__)'), eager, CPU."
echo "# Written by: bash tools/s6_bench_record.sh $rounds, from $(date -u '+%Y-%m-%d %H:%M') UTC."
echo "# Each round, at 1 and at 2 threads:"
echo "#   $crate --bench --context $short --threads N --repeat 1"
[ -z "$long" ] || echo "#   $crate --bench --context $long --attention tiled --threads N --repeat 1"
echo "#   $python tools/torch_attention_bench.py --lengths ${short//,/ } ${long//,/ } --threads N --repeat 1"
echo "#   $crate --bench --modules --attention naive,tiled --threads N --repeat 1"
echo "#   $python tools/torch_attention_bench.py --modules --threads N --repeat 1"
for round in $(seq "$rounds"); do
    for threads in 1 2; do
        echo "round $round of $rounds, $threads thread(s) …" >&2
        "$crate" --bench --context "$short" --threads "$threads" --repeat 1
        [ -z "$long" ] || "$crate" --bench --context "$long" --attention tiled --threads "$threads" --repeat 1
        "$python" "${torch[@]}" --lengths ${short//,/ } ${long//,/ } --threads "$threads" --repeat 1
        "$crate" --bench --modules --attention naive,tiled --threads "$threads" --repeat 1
        "$python" "${torch[@]}" --modules --threads "$threads" --repeat 1
    done
done
echo "# Ended $(date -u '+%Y-%m-%d %H:%M') UTC."
