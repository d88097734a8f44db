#!/usr/bin/env bash
# The book with its panels, in one command: `bash book/build.sh` (from anywhere).
#
# 1. the page's WebAssembly (book/play/) and its JavaScript glue, into book/src/play/pkg/, a
#    second build with relaxed SIMD (the fused lanes of `fast::wasm_fma`) into book/src/play/pkg/relaxed/,
#    which the page loads where the browser validates relaxed SIMD, and a third with relaxed SIMD and
#    shared memory (atomics: the training team's helpers as Web Workers) into book/src/play/pkg/threads/,
#    which it loads where the page is also cross-origin isolated;
# 2. the trained model the stage-5 panel samples from, made by the crate itself (the chapter's run,
#    `s5_gpt train --save`), into book/src/play/data/checkpoint/;
# 3. the corpus the stage-5 panel trains on, copied to book/src/play/data/;
# 4. both editions: English into book/book/, Chinese into book/book/zh-CN/.
# None of 1-3 is committed. Without a WebAssembly toolchain the book is built all the same, and its
# panels say that they need one.
#
# PLAY_CHECKPOINT_STEPS=N trains the checkpoint for N steps only (quick local builds; the default
# is the chapter's whole run, whose sample the chapter prints).
set -euo pipefail
cd "$(dirname "$0")/.."

play=book/src/play
wasm_bindgen_version=0.2.130
step() { printf '\n==> %s\n' "$*"; }

# Each wasm build goes to its own target folder, so that it never rebuilds the native one or the other.
wasm_target_dir=target/wasm
relaxed_target_dir=target/wasm-relaxed
threads_target_dir=target/wasm-threads
wasm_out=wasm32-unknown-unknown/release/attention_play.wasm

# Builds book/play for wasm32 into the target folder $1, with the target features $2 added to
# .cargo/config.toml's (which has +simd128): with rustup's target if it is installed, else with a
# Rust whose standard library source is installed (Debian's rustc-web and rust-web-src) and
# -Zbuild-std. Returns 2, saying why, if neither is there; a failed build stops the script.
# Shared memory (+atomics) needs a standard library built with it, so it takes the second route only:
# with rustup's Rust where its rust-src component is installed, else with the system's.
build_wasm() {
    local target_dir=$1 features=${2:-}
    local extra=()
    local flags="'-C','target-feature=$features'"
    # Shared memory: imported (the helpers' instances get the trainer's), with room to grow, and the
    # thread-local storage that wasm-bindgen sets up for each instance.
    local link
    [[ $features == *atomics* ]] && for link in --shared-memory --import-memory --max-memory=1073741824 \
        --export=__wasm_init_tls --export=__tls_size --export=__tls_align --export=__tls_base; do
        flags+=",'-C','link-arg=$link'"
    done
    # --config adds to the config file's rustflags (arrays are joined), keeping its --cfg.
    [ -n "$features" ] && extra=(--config "target.wasm32-unknown-unknown.rustflags=[$flags]")
    if [[ $features != *atomics* ]] && rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
        cargo build --release --target wasm32-unknown-unknown -p attention-play \
            --target-dir "$target_dir" "${extra[@]}" || exit 1
        return
    fi
    local rustc=/usr/bin/rustc cargo=/usr/bin/cargo
    if [[ $features == *atomics* ]] &&
        [ -f "$(rustc --print sysroot 2>/dev/null)/lib/rustlib/src/rust/library/Cargo.lock" ]; then
        rustc=$(rustup which rustc 2>/dev/null || command -v rustc)
        cargo=$(rustup which cargo 2>/dev/null || command -v cargo)
    fi
    local sysroot
    sysroot=$("$rustc" --print sysroot 2>/dev/null) || sysroot=
    if [ ! -x "$cargo" ] || [ ! -f "$sysroot/lib/rustlib/src/rust/library/Cargo.lock" ]; then
        if [[ $features == *atomics* ]]; then
            echo "no Rust standard library source for a shared-memory build (\`rustup component add rust-src\`, or Debian's rust-web-src); the page trains on one thread" >&2
        else
            echo "no wasm32 target: run \`rustup target add wasm32-unknown-unknown\` (the panels need it)" >&2
        fi
        return 2
    fi
    # A linker for wasm32: the system Rust's own, else rustup's, else one on PATH.
    local linker candidate
    linker=
    for candidate in "$sysroot/lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld" \
        "$(rustc --print sysroot 2>/dev/null)/lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld" \
        "$(command -v rust-lld || true)" "$(command -v wasm-ld || true)"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ] && [ -e "$(readlink -f "$candidate")" ]; then
            linker=$candidate
            break
        fi
    done
    if [ -z "$linker" ]; then
        echo "no linker for wasm32 (rust-lld or wasm-ld): run \`rustup target add wasm32-unknown-unknown\` (the panels need it)" >&2
        return 2
    fi
    RUSTC="$rustc" RUSTC_BOOTSTRAP=1 CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER="$linker" \
        "$cargo" build --release --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort \
        -p attention-play --target-dir "$target_dir" "${extra[@]}" || exit 1
}

# The JavaScript glue of the wasm file $1 into the folder $2, from the wasm-bindgen program of the
# same version as the crate's. Returns 2, saying why, if there is no such program.
bind_wasm() {
    local found
    found=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}') || found=
    if [ "$found" != "$wasm_bindgen_version" ]; then
        echo "no wasm-bindgen $wasm_bindgen_version${found:+ (found $found)}: run \`cargo install wasm-bindgen-cli --version $wasm_bindgen_version\` (the panels need it)" >&2
        return 2
    fi
    wasm-bindgen --target web --out-dir "$2" "$1" || exit 1
}

step "the page's WebAssembly: float64 lanes (every browser), fused lanes (relaxed SIMD), then fused lanes on every core"
rm -rf "$play/pkg" # never an old build beside new pages
if build_wasm "$wasm_target_dir" && bind_wasm "$wasm_target_dir/$wasm_out" "$play/pkg" &&
    build_wasm "$relaxed_target_dir" +relaxed-simd &&
    bind_wasm "$relaxed_target_dir/$wasm_out" "$play/pkg/relaxed"; then
    # Without this one the page trains on one thread, and says so.
    if build_wasm "$threads_target_dir" +relaxed-simd,+atomics,+bulk-memory; then
        bind_wasm "$threads_target_dir/$wasm_out" "$play/pkg/threads"
    else
        echo "warning: the book is built without its shared-memory WebAssembly" >&2
    fi
    for wasm in "$play"/pkg/{,relaxed/,threads/}attention_play_bg.wasm; do
        [ -f "$wasm" ] && echo "$wasm: $(wc -c <"$wasm") bytes"
    done
else
    rm -rf "$play/pkg"
    echo "warning: the book is built without its panels' WebAssembly" >&2
fi

step "the corpus the panels train on"
corpus=
for candidate in data/tinyshakespeare.txt ../shared/data/tinyshakespeare.txt; do
    if [ -f "$candidate" ]; then
        corpus=$candidate
        break
    fi
done
mkdir -p "$play/data"
if [ -n "$corpus" ]; then
    cp "$corpus" "$play/data/tinyshakespeare.txt"
    echo "copied $corpus"
else
    echo "warning: no Tiny Shakespeare corpus (run data/fetch.sh); the stage-5 panels need it" >&2
fi

step "the trained model the stage-5 panel samples from"
steps=${PLAY_CHECKPOINT_STEPS:-}
# Made again only when the code, the corpus or the number of steps changed.
key=$({
    find src examples -type f | LC_ALL=C sort | xargs sha256sum
    sha256sum Cargo.lock
    [ -n "$corpus" ] && sha256sum <"$corpus"
    echo "steps=${steps:-all}"
} | sha256sum | cut -d' ' -f1)
checkpoint=$play/data/checkpoint
if [ -z "$corpus" ]; then
    echo "skipped: no corpus"
elif [ -f "$checkpoint/config.json" ] && [ "$(cat "$play/data/checkpoint.key" 2>/dev/null)" = "$key" ]; then
    echo "up to date: $checkpoint"
else
    rm -f "$play/data/checkpoint.key"
    # The test profile is optimised as release is (with overflow checks on; the bits are the same),
    # and `cargo test` has already built this example in it, so CI builds the crate once.
    cargo run --profile test --example s5_gpt -- train --data "$corpus" --save "$checkpoint" \
        --overwrite --quiet --log-every 0 ${steps:+--max-steps "$steps"}
    echo "$key" >"$play/data/checkpoint.key"
fi

step "the book, English and Chinese"
mdbook build book
# The Chinese edition goes into the English one's zh-CN/ folder, where each page's language link
# expects it.
MDBOOK_BOOK__LANGUAGE=zh-CN mdbook build book -d book/book/zh-CN
echo "built book/book/ and book/book/zh-CN/; serve them with \`python3 -m http.server -d book/book\` (panels need a server, not file://)"
