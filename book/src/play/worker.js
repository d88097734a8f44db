// The panels' background thread (a module Web Worker, started by theme/play-engine.js): it loads the
// crate's WebAssembly (pkg/, made by book/build.sh) and runs what a panel asks, so that the page never
// freezes while a model trains. It computes nothing of its own: each request calls one export of the wasm
// front, and an export's JSON answer is handed on as the object it writes.
//
// A request is {id, op, args}; the answer is {id, ok: true, value, ms} or {id, ok: false, error, kind},
// where error is the export's one-line message and kind tells a bad input ("input") from a missing file
// ("missing"), a missing build ("unavailable") and a crash of the WebAssembly itself ("crash").
//
// Three builds sit in pkg/: pkg/relaxed/ has relaxed SIMD, whose f32x4.relaxed_madd gives the product
// kernel's fused lanes; pkg/threads/ has it too, and shared memory, so that helper workers (helper.js)
// take pieces of each training step as the native helper threads do; pkg/ runs everywhere, with the
// exact float64 lanes on one thread. The worker loads the threads build where the browser validates
// relaxed SIMD and the page is cross-origin isolated (theme/isolation.js), else the relaxed one where
// it validates relaxed SIMD, else pkg/. The crate then checks at start-up that the instruction rounds
// once before it uses it (choose_kernel). Every build, kernel and thread count gives the same bits.
// The worker's own URL may say kernel=f64, which forces the float64 lanes, and threads=N, which
// trains on N threads (1: without shared memory); the page passes its own parameters on.

const OPTIONS = new URL(self.location.href).searchParams;

// The smallest module that uses f32x4.relaxed_madd: (func (result v128) three f32x4.splat of 0, then
// relaxed_madd). A browser without relaxed SIMD refuses it.
const RELAXED_PROBE = new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // "\0asm", version 1
    0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // types: () -> v128
    0x03, 0x02, 0x01, 0x00, // one function of that type
    0x0a, 0x1c, 0x01, 0x1a, 0x00, // code: one body of 26 bytes, no locals
    0x43, 0, 0, 0, 0, 0xfd, 0x13, 0x43, 0, 0, 0, 0, 0xfd, 0x13, 0x43, 0, 0, 0, 0, 0xfd, 0x13,
    0xfd, 0x85, 0x02, 0x0b, // f32x4.relaxed_madd (0xfd 0x105), end
]);

// Where the threads build is: its glue, and its WebAssembly, which helpers instantiate again.
const THREADS_GLUE = new URL("./pkg/threads/attention_play.js", import.meta.url);
const THREADS_WASM = new URL("./pkg/threads/attention_play_bg.wasm", import.meta.url);

let play = null; // the wasm front's exports, once loaded
let build = null; // "threads", "relaxed" or "float64": which of the three builds was loaded
let kernel = null; // the product kernel chosen at start-up: "fused" or "f64"
let shared = null; // the threads build's {module, memory}, which a helper needs
let oneThread = null; // why training runs on one thread: a key of play-labels.js' threads_why_…
let trainer = null; // the one Trainer of this worker (a panel starts one worker per run)
let sampler = null; // the one Sampler of this worker
let heads = null; // the one Heads (stage 8's model) of this worker

class Missing extends Error {}

/** Loads the WebAssembly once; a missing build becomes an "unavailable" answer. */
async function load() {
    if (play) {
        return play;
    }
    const fusedWanted = OPTIONS.get("kernel") !== "f64";
    const relaxed = WebAssembly.validate(RELAXED_PROBE);
    let module = null;
    oneThread = OPTIONS.get("threads") === "1" ? "forced" : !relaxed ? "no_relaxed"
        : self.crossOriginIsolated !== true ? "not_isolated" : null;
    if (!oneThread) {
        module = await importShared().catch((e) => {
            console.warn("the shared-memory build did not load:", e);
            return null;
        });
        build = module ? "threads" : null;
        oneThread = module ? null : "no_build";
    }
    if (!module && fusedWanted && relaxed) {
        module = await importBuild("./pkg/relaxed/attention_play.js").catch(() => null);
        build = module ? "relaxed" : null;
    }
    if (!module) {
        try {
            module = await importBuild("./pkg/attention_play.js");
        } catch (e) {
            const error = new Error(String(e && e.message ? e.message : e));
            error.unavailable = true;
            throw error;
        }
        build = "float64";
    }
    kernel = module.choose_kernel(fusedWanted);
    play = module;
    return play;
}

/** The threads build's glue, instantiated with a shared memory that helpers can be given. */
async function importShared() {
    const module = await import(THREADS_GLUE);
    const compiled = await WebAssembly.compileStreaming(fetch(THREADS_WASM));
    const exports = await module.default({ module_or_path: compiled });
    shared = { module: compiled, memory: exports.memory };
    return module;
}

/**
 * Starts helpers until training runs on `wanted` threads (the calling one and helpers), and resolves
 * to the threads it runs on. A helper that fails to start is left out (the team needs none).
 */
async function startHelpers(wanted) {
    if (!shared) {
        return 1;
    }
    const starting = [];
    for (let n = play.threads(); n < wanted; n++) {
        starting.push(new Promise((resolve) => {
            const failed = (message) => resolve(console.warn("a helper did not start:", message));
            try {
                const helper = new Worker(new URL("./helper.js", import.meta.url), { type: "module" });
                helper.onmessage = (event) => (event.data.ok ? resolve() : failed(event.data.error));
                helper.onerror = (event) => failed(event.message);
                helper.postMessage({ glue: THREADS_GLUE.href, ...shared });
            } catch (e) {
                failed(e && e.message); // no workers inside workers here
            }
        }));
    }
    await Promise.all(starting);
    // A helper says it is ready just before it counts itself in: wait for the count (a moment).
    for (let tries = 0; play.threads() < wanted && tries < 100; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
    }
    if (play.threads() === 1 && wanted > 1) {
        oneThread = "no_helpers";
    }
    return play.threads();
}

/** One build's glue, with its WebAssembly instantiated. */
async function importBuild(path) {
    const module = await import(path);
    await module.default();
    return module;
}

/** A file that book/build.sh puts beside this script (the corpus, the checkpoint). */
async function fetchFile(path, as) {
    const response = await fetch(new URL(path, import.meta.url));
    if (!response.ok) {
        throw new Missing(path);
    }
    return as === "bytes" ? new Uint8Array(await response.arrayBuffer()) : response.text();
}

const ops = {
    stage_output: (stage, seed) => play.stage_output(stage, seed),
    s1_query: (query) => play.s1_query(query),
    stage_weights: (stage, seed, knob) => JSON.parse(play.stage_weights(stage, seed, knob)),
    page_facts: () => JSON.parse(play.page_facts()),
    // {flags, output, steps, length}: stage 6's run for the three fields' text.
    s6_output: (scores, context, tile) => JSON.parse(play.s6_output(scores, context, tile)),
    // {flags, output}: stage 7's KV-memory calculator for a fragment of its command line.
    s7_kv: (flags) => JSON.parse(play.s7_kv(flags)),
    // {flags, output, labels, variants}: stage 7's first blocks of each variant on a prompt.
    s7_weights: (prompt, variant) => JSON.parse(play.s7_weights(prompt, variant)),
    fma_self_check: (n, seed) => play.fma_self_check(n, seed),
    // What trains here: the build loaded, the product kernel it chose, the threads it runs on and, for
    // one thread, why.
    engine_info: () => ({ build, kernel, threads: threadCount(), oneThread: threadCount() > 1 ? null : oneThread }),

    // `threads`: how many threads this run may train on (0: as many as the machine has cores).
    async trainer_new(flags, threads) {
        const corpus = await fetchFile("data/tinyshakespeare.txt", "text");
        if (trainer) {
            trainer.free();
        }
        trainer = null;
        trainer = new play.Trainer(flags, corpus);
        const wanted = Number(OPTIONS.get("threads")) || threads || navigator.hardwareConcurrency || 1;
        if (wanted === 1 && !oneThread) {
            oneThread = (navigator.hardwareConcurrency || 1) === 1 ? "one_core" : "shared_out";
        }
        const running = await startHelpers(wanted);
        return { header: play.Trainer.header(), steps: trainer.steps(), total: trainer.total_steps(),
            kernel, threads: running, oneThread: running > 1 ? null : oneThread };
    },
    // {lines, rows, steps}: the loss CSV's lines, the same as numbers, and the steps trained so far.
    trainer_run: (n) => ({ ...JSON.parse(trainer.run(n)), steps: trainer.steps() }),
    trainer_test_loss: () => trainer.test_loss(),
    trainer_sample: (length) => trainer.sample(length),

    // Stage 8: the study's two-block attention-only model, its probes, maps and ablations.
    async heads_new(threads) {
        const corpus = await fetchFile("data/tinyshakespeare.txt", "text");
        if (heads) {
            heads.free();
        }
        heads = null;
        heads = new play.Heads(corpus);
        const wanted = Number(OPTIONS.get("threads")) || threads || navigator.hardwareConcurrency || 1;
        const running = await startHelpers(wanted);
        return { steps: heads.steps(), total: heads.total_steps(), kernel, threads: running };
    },
    // {rows, steps}: the steps' losses, and the steps trained so far.
    heads_run: (n) => ({ ...JSON.parse(heads.run(n)), steps: heads.steps() }),
    // {line, step, heads, first_copy, second_copy, icl}: a probe, its line the record's.
    heads_probe: () => JSON.parse(heads.probe()),
    heads_pattern: (text) => JSON.parse(heads.pattern(text)),
    heads_ablate: (block, head) => JSON.parse(heads.ablate(block, head)),

    async sampler_new() {
        const config = await fetchFile("data/checkpoint/config.json", "text");
        const weights = await fetchFile("data/checkpoint/model.safetensors", "bytes");
        return ops.sampler_from(config, weights);
    },
    // A checkpoint's two files as the page read them (the book's, or a reader's own), checked as
    // `generate --checkpoint` checks a folder.
    sampler_from(config, weights) {
        if (sampler) {
            sampler.free();
        }
        sampler = null;
        sampler = new play.Sampler(config, weights);
        return sampler.steps();
    },
    // Each value is the text of its field, read by the command line's own parser ("" for its default).
    // noCache: `--no-cache`, the same text, each window computed again.
    generate: (prompt, temperature, topK, seed, length, noCache) =>
        sampler.generate(prompt, temperature, topK, seed, length, Boolean(noCache)),
    probs: (prompt, temperature, topK) => JSON.parse(sampler.probs(prompt, temperature, topK)),
    attention: (prompt) => JSON.parse(sampler.attention(prompt)),
};

/** The threads a training step runs on now. */
function threadCount() {
    return play && play.threads ? play.threads() : 1;
}

/** The one-line message of whatever an export threw (wasm-bindgen throws an Error or a string). */
function messageOf(e) {
    const text = e instanceof Error ? e.message : String(e);
    return text.split("\n")[0];
}

self.onmessage = async (event) => {
    const { id, op, args } = event.data;
    try {
        await load();
        const start = performance.now();
        const value = await ops[op](...(args || []));
        self.postMessage({ id, ok: true, value, ms: performance.now() - start });
    } catch (e) {
        let kind = "input";
        if (e && e.unavailable) {
            kind = "unavailable";
        } else if (e instanceof Missing) {
            kind = "missing";
        } else if (e instanceof WebAssembly.RuntimeError) {
            kind = "crash"; // a panic or trap: this instance is unusable, and the panel starts a new worker
        }
        self.postMessage({ id, ok: false, error: messageOf(e), kind });
    }
};
