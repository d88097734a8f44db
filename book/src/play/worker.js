// The panels' background thread (a module Web Worker, started by theme/play.js): it loads the crate's
// WebAssembly (pkg/, made by book/build.sh) and runs what a panel asks, so that the page never freezes
// while a model trains. It computes nothing of its own: each request calls one export of the wasm front.
//
// A request is {id, op, args}; the answer is {id, ok: true, value, ms} or {id, ok: false, error, kind},
// where error is the export's one-line message and kind tells a bad input ("input") from a missing file
// ("missing"), a missing build ("unavailable") and a crash of the WebAssembly itself ("crash").

let play = null; // the wasm front's exports, once loaded
let trainer = null; // the one Trainer of this worker (a panel starts one worker per run)
let sampler = null; // the one Sampler of this worker

class Missing extends Error {}

/** Loads the WebAssembly once; a missing build becomes an "unavailable" answer. */
async function load() {
    if (play) {
        return play;
    }
    let module;
    try {
        module = await import("./pkg/attention_play.js");
    } catch (e) {
        const error = new Error(String(e && e.message ? e.message : e));
        error.unavailable = true;
        throw error;
    }
    await module.default();
    play = module;
    return play;
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
    stage_weights: (stage, seed, knob) => play.stage_weights(stage, seed, knob),
    fma_self_check: (n, seed) => play.fma_self_check(n, seed),

    async trainer_new(flags) {
        const corpus = await fetchFile("data/tinyshakespeare.txt", "text");
        if (trainer) {
            trainer.free();
        }
        trainer = null;
        trainer = new play.Trainer(flags, corpus);
        return { header: play.Trainer.header(), steps: trainer.steps(), total: trainer.total_steps() };
    },
    trainer_run: (n) => ({ lines: trainer.run(n), steps: trainer.steps() }),
    trainer_sample: (length) => trainer.sample(length),

    async sampler_new() {
        const config = await fetchFile("data/checkpoint/config.json", "text");
        const weights = await fetchFile("data/checkpoint/model.safetensors", "bytes");
        if (sampler) {
            sampler.free();
        }
        sampler = null;
        sampler = new play.Sampler(config, weights);
        return JSON.parse(config).step;
    },
    // Each value is the text of its field, read by the command line's own parser ("" for its default).
    generate: (prompt, temperature, topK, seed, length) =>
        sampler.generate(prompt, temperature, topK, seed, length),
    probs: (prompt, temperature, topK) => sampler.probs(prompt, temperature, topK),
    attention: (prompt) => sampler.attention(prompt),
};

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
