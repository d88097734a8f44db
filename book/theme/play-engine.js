// The book's panels, part 1 of 9: what every panel shares. The parts are, in the order book.toml loads
// them (after play-labels.js, which holds the labels in both languages):
//   play-engine.js   the worker, the URL parameters, the labels, a panel's state and fields, the set-up
//   play-charts.js   the pictures: heat maps, the loss curves, the bars of a distribution
//   play-stage.js    stages 1-4: "Run it here"
//   play-train.js    stage 5: "Train it here"
//   play-sample.js   stage 5: "Sample the trained model"
//   play-flash.js    stage 6: "Run it here", the online softmax and tiled attention at length
//   play-kv.js       stage 7: "Run it here", the KV-memory calculator
//   play-variants.js stage 7: each variant's first block on a prompt, its mask and its heads' weights
//   play-heads.js    stage 8: the attention-only model trained live, its heads' scores, maps and ablation
// They share one object, window.attentionPanels; each panel's file adds its kind to `kinds`.
//
// A chapter marks a panel with an empty <div class="play-panel" data-play="…">; the set-up below fills it
// in, in the edition's language. Everything a panel shows is computed by the crate, compiled to
// WebAssembly (book/play/), in a module Web Worker (src/play/worker.js): the panels only format and draw,
// from the numbers the front returns beside its text, and take the flags and constants they write from
// its page_facts(). Nothing is loaded from the network; the worker reads the wasm, the corpus and the
// checkpoint from the book's own play/ folder.
//
// URL parameters drive the panels, so that a link can be shared and a test can drive the page:
//   sN_….html?seed=7&run          runs the stage on load (also &query=I, &dropout=P, &heads=N: the knob)
//   s5_gpt.html?train=300&seed=N&qkv&heads=N&residual&layer-norm&dropout=P&mask-value=V
//                                 &kv-heads=K&window=W&rope (stage 7's variants)
//                                 &test adds the test loss at the end (the whole chapter's run always does)
//   &kernel=f64                   on any page: the exact float64 product kernel, even where fused lanes work
//   &threads=N                    on any page: train on N threads (1: the builds without shared memory)
//   s5_gpt.html?generate&prompt=…&temperature=T&top-k=K&sample-seed=S&sample-len=N&no-cache
//   s5_gpt.html?probs=…&temperature=T&top-k=K    the next character's distribution (`generate --probs`)
//   s6_flash.html?scores=X,…&context=T&tile=N&run  stage 6's walk and its head at length
//   s7_variants.html?layers=N&heads=H&kv-heads=K&head-dim=D&tokens=T&window=W&latent=L&bytes=B&run
//                                 stage 7's KV-memory calculator (`s7_variants --kv`)
//   s7_variants.html?weights=…&variant=NAME   stage 7's first blocks (`s7_variants --weights … --variant …`)
//   s8_heads.html?heads-train=N&pattern=TEXT&ablate=bBhH   stage 8's model trained N steps, probed every
//                                 100 (`s8_heads --phase --model aon2`), a text drawn head by head, a head zeroed
// The training and sampling parameters are the command line's flags without their dashes.
// A panel sets data-state on its element: "idle", "running", "paused", "done", "error" or "unavailable";
// the sample panel's distribution sets data-probs-state the same way, and the sample panel sets
// data-checkpoint to "book" or "own" (a checkpoint the reader chose) once one is loaded.
(function () {
    "use strict";

    const ROOT = typeof path_to_root === "string" ? path_to_root : "";
    const PARAMS = new URLSearchParams(window.location.search);
    const ALL_LABELS = window.PLAY_LABELS || {};
    const LABELS = ALL_LABELS[document.documentElement.lang] || ALL_LABELS.en || {};
    // The page's parameters that choose how the worker computes (never what): passed on in its URL.
    const WORKER_QUERY = (() => {
        const options = new URLSearchParams();
        if (PARAMS.get("kernel") === "f64") {
            options.set("kernel", "f64");
        }
        if (/^[1-9][0-9]?$/.test(PARAMS.get("threads") || "")) {
            options.set("threads", PARAMS.get("threads"));
        }
        const text = options.toString();
        return text ? "?" + text : "";
    })();

    /** The label `key`, with each {name} replaced by vars[name]. */
    function t(key, vars) {
        let text = LABELS[key] !== undefined ? LABELS[key] : key;
        for (const [name, value] of Object.entries(vars || {})) {
            text = text.split("{" + name + "}").join(String(value));
        }
        return text;
    }

    /** A new element: el("pre", {class: "x"}, child, "text", …). */
    function el(tag, attrs, ...children) {
        const node = document.createElement(tag);
        for (const [name, value] of Object.entries(attrs || {})) {
            if (value === false || value === null || value === undefined) {
                continue;
            }
            node.setAttribute(name, value === true ? "" : value);
        }
        for (const child of children) {
            node.append(child);
        }
        return node;
    }

    const SVG_NS = "http://www.w3.org/2000/svg";
    function svg(tag, attrs, ...children) {
        const node = document.createElementNS(SVG_NS, tag);
        for (const [name, value] of Object.entries(attrs || {})) {
            node.setAttribute(name, String(value));
        }
        for (const child of children) {
            node.append(child);
        }
        return node;
    }

    // ---------------------------------------------------------------------------------------------
    // The worker: one per run, asked by message, answering by message.

    /** A failure a panel shows in one line; kind is "input", "missing", "unavailable" or "crash". */
    class PlayError extends Error {
        constructor(message, kind) {
            super(message);
            this.kind = kind;
        }
    }

    class Engine {
        constructor() {
            this.worker = null;
            this.pending = new Map();
            this.nextId = 1;
        }

        start() {
            try {
                this.worker = new Worker(ROOT + "play/worker.js" + WORKER_QUERY, { type: "module" });
            } catch (e) {
                throw new PlayError(String(e && e.message ? e.message : e), "unavailable");
            }
            this.worker.onmessage = (event) => this.answer(event.data);
            // A module that fails to load (no worker script) reports here, with no message of its own.
            this.worker.onerror = (event) => {
                event.preventDefault();
                this.fail(new PlayError(event.message || "worker", "unavailable"));
            };
        }

        answer({ id, ok, value, ms, error, kind }) {
            const call = this.pending.get(id);
            if (!call) {
                return;
            }
            this.pending.delete(id);
            if (ok) {
                call.resolve({ value, ms });
            } else {
                if (kind === "crash") {
                    this.stop(); // a trapped WebAssembly instance is not used again
                }
                call.reject(new PlayError(error, kind));
            }
        }

        fail(error) {
            const calls = [...this.pending.values()];
            this.stop();
            calls.forEach((call) => call.reject(error));
        }

        /** Calls op in the worker; resolves to {value, ms}, ms being the time the export took. */
        async timed(op, ...args) {
            if (!this.worker) {
                // A worker started before the page is isolated could not share memory, and one
                // started before a reload into isolation would be thrown away (theme/isolation.js).
                await (window.attentionIsolation && window.attentionIsolation.ready);
            }
            return new Promise((resolve, reject) => {
                if (!this.worker) {
                    this.start();
                }
                const id = this.nextId++;
                this.pending.set(id, { resolve, reject });
                this.worker.postMessage({ id, op, args });
            });
        }

        async call(op, ...args) {
            return (await this.timed(op, ...args)).value;
        }

        stop() {
            if (this.worker) {
                this.worker.terminate();
            }
            this.worker = null;
            this.pending.clear();
        }
    }

    /** "1 thread", and why: the label `threads_why_<why>`, with isolation.js's reason where it names one. */
    function oneThreadLine(why) {
        const isolation = window.attentionIsolation || {};
        const reason = t("isolation_" + (isolation.reason || "failed"));
        return why ? t("threads_why_" + why, { reason: reason }) : t("threads_one");
    }

    /** The one line a panel shows for an error. */
    function messageFor(error, missingKey) {
        switch (error.kind) {
            case "unavailable":
                return t("no_wasm");
            case "missing":
                return t(missingKey || "no_wasm");
            case "crash":
                return t("crashed", { message: error.message });
            case "input":
                return error.message;
            default:
                return t("crashed", { message: String(error.message || error) });
        }
    }

    // ---------------------------------------------------------------------------------------------
    // The parts of a panel.

    class Panel {
        constructor(node) {
            this.node = node;
            node.replaceChildren();
            node.classList.add("play-ready");
            this.message = el("p", { class: "play-message", role: "status" });
            this.state("idle");
        }

        state(name) {
            this.node.dataset.state = name;
        }

        /** A run begins: the panel says so, and its button waits until the run ends. */
        running() {
            this.state("running");
            this.say(t("running"));
            this.button.disabled = true;
        }

        /** Shows one line. */
        say(text, isError) {
            this.message.replaceChildren(...rich(text));
            this.message.classList.toggle("play-error", Boolean(isError));
        }

        /** Shows an error in the panel's message line and marks the panel. */
        failed(error, missingKey) {
            this.say(messageFor(error, missingKey), true);
            this.state(error.kind === "input" ? "error" : "unavailable");
        }
    }

    /** Flags as the end of a command line, " -- --kv --layers 48", each word quoted as a shell needs it;
     * nothing for no flags. */
    function commandFlags(flags) {
        const word = (w) => (/^[\w.,+=:-]+$/.test(w) ? w : "'" + w.split("'").join("'\\''") + "'");
        return flags.length ? " -- " + flags.map(word).join(" ") : "";
    }

    /** A label's text as nodes: what stands between backticks is shown as code. */
    function rich(text) {
        return String(text).split("`").map((part, i) => (i % 2 ? el("code", {}, part) : part));
    }

    /** A labelled field: el's <label> holding the caption and the control. */
    function field(caption, control, extraClass) {
        return el("label", { class: "play-field" + (extraClass ? " " + extraClass : "") },
            el("span", { class: "play-caption" }, caption), control);
    }

    function textInput(cls, value, attrs) {
        return el("input", Object.assign({ type: "text", class: cls, value: value, spellcheck: "false",
            autocomplete: "off" }, attrs || {}));
    }

    function checkbox(cls, checked) {
        const box = el("input", { type: "checkbox", class: cls });
        box.checked = checked;
        return box;
    }

    /** A box of output text under its caption, scrolled when long. */
    function outputBox(caption, pre) {
        const captionNode = typeof caption === "string" ? el("span", {}, ...rich(caption)) : caption;
        return el("div", { class: "play-output-box" }, el("div", { class: "play-output-caption" }, captionNode), pre);
    }

    const kit = {
        PARAMS, t, el, svg, PlayError, Engine, oneThreadLine, messageFor, Panel, rich, field, textInput,
        checkbox, outputBox, commandFlags,
        kinds: {}, // each panel's file adds its class: {stage: StagePanel, …}
        facts: null, // the front's page_facts(), once the set-up has it
    };
    window.attentionPanels = kit;

    // ---------------------------------------------------------------------------------------------

    /** A panel that can only say `text`: opened from disk, or built without its WebAssembly. */
    function mute(node, text) {
        const panel = new Panel(node);
        node.append(panel.message);
        panel.say(text, true);
        panel.state("unavailable");
    }

    async function setUp() {
        const nodes = document.querySelectorAll(".play-panel[data-play]");
        if (window.location.protocol === "file:") {
            // Browsers refuse module workers and fetches from file:, so the panels cannot run here.
            nodes.forEach((node) => mute(node, t("file_protocol")));
            return;
        }
        // For the browser test and the curious: any export, by name, in a worker of its own.
        const engine = new Engine();
        window.attentionPlay = { call: (op, ...args) => engine.call(op, ...args) };
        if (!nodes.length) {
            return;
        }
        try {
            kit.facts = await engine.call("page_facts");
        } catch (error) {
            nodes.forEach((node) => mute(node, messageFor(error)));
            return;
        }
        nodes.forEach((node) => {
            const Kind = kit.kinds[node.dataset.play];
            if (Kind) {
                new Kind(node);
            }
        });
    }

    // The panels' files load after this one, before the document has been read to its end.
    if (document.readyState === "loading") {
        document.addEventListener("DOMContentLoaded", setUp);
    } else {
        setTimeout(setUp);
    }
})();
