# The machine a record was taken on, as its header lines say it; sourced by the record scripts.
#   machine_lines   "# Machine: …", "# Vector flags: …" and "# CPU family … model …" lines

# The CPU's name, its vector flags that the fast layer can use, and its family and model.
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|avx512f|avx512bw|avx512vl|avx512_bf16|amx_tile)$' | paste -sd' ' -)
family=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
model=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')

machine_lines() {
    echo "# Machine: $cpu, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB."
    echo "# Vector flags: $flags."
    echo "# CPU family $family model $model, as /proc/cpuinfo gives them."
}
