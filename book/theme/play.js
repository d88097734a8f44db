// The book's panels: "Run it here" (stages 1-4), "Train it here" and "Sample the trained model" (stage 5).
//
// A chapter marks a panel with an empty <div class="play-panel" data-play="…">; this script fills it in,
// in the edition's language (theme/play-labels.js). Everything a panel shows is computed by the crate,
// compiled to WebAssembly, in a module Web Worker (src/play/worker.js): this script only formats and draws.
// Nothing is loaded from the network; the worker reads the wasm, the corpus and the checkpoint from the
// book's own play/ folder.
//
// URL parameters drive the panels, so that a link can be shared and a test can drive the page:
//   sN_….html?seed=7&run          runs the stage on load (also &query=I, &dropout=P, &heads=N: the knob)
//   s5_gpt.html?train=300&seed=N&qkv&heads=N&residual&layer-norm&dropout=P&mask-value=V
//                                 &test adds the test loss at the end (the whole chapter's run always does)
//   &kernel=f64                   on any page: the exact float64 product kernel, even where fused lanes work
//   &threads=N                    on any page: train on N threads (1: the builds without shared memory)
//   s5_gpt.html?generate&prompt=…&temperature=T&top-k=K&sample-seed=S&sample-len=N
//   s5_gpt.html?probs=…&temperature=T&top-k=K    the next character's distribution (`generate --probs`)
// A panel sets data-state on its element: "idle", "running", "paused", "done", "error" or "unavailable";
// the sample panel's distribution sets data-probs-state the same way.
(function () {
    "use strict";

    const ROOT = typeof path_to_root === "string" ? path_to_root : "";
    const PARAMS = new URLSearchParams(window.location.search);
    const ALL_LABELS = window.PLAY_LABELS || {};
    const LABELS = ALL_LABELS[document.documentElement.lang] || ALL_LABELS.en || {};
    // The chapter's six words (stage 1's query knob); the sentence stays English in both editions.
    const TOKENS = ["Your", "journey", "starts", "with", "one", "step"];
    // ColorBrewer's "Blues", the scale of the book's own heat maps (src/plot.rs).
    const BLUES = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
    const MASKED = "#e4e4e4"; // a cell the causal mask removed, as in the book's figures
    const CURVE_COLOURS = ["#2171b5", "#d95f02"];
    const BAR_COLOUR = "#2171b5";
    const SAMPLE_EVERY = 200; // a sample from the model being trained every this many steps
    const SAMPLE_LENGTH = 120;
    const PROBS_BARS = 20; // the likeliest characters drawn as bars; the rest are counted
    const PROBS_DELAY = 150; // ms without an edit before the distribution is asked again
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

    function blue(fraction) {
        const x = Math.min(Math.max(fraction, 0), 1) * (BLUES.length - 1);
        const k = Math.min(Math.floor(x), BLUES.length - 2);
        const f = x - k;
        const mix = (i) => Math.round(BLUES[k][i] + (BLUES[k + 1][i] - BLUES[k][i]) * f);
        return "rgb(" + mix(0) + "," + mix(1) + "," + mix(2) + ")";
    }

    /**
     * One heat map as SVG: rows are queries, columns keys, labels the tokens. Small maps print each
     * weight in its cell; large ones (a prompt of many characters) only colour it.
     */
    function heatMap(title, labels, weights, options) {
        const { causal = false, highlightRow = -1 } = options || {};
        const rows = weights.length;
        const cols = rows ? weights[0].length : 0;
        const big = Math.max(rows, cols) > 10;
        const cell = big ? Math.max(12, Math.min(22, Math.floor(420 / Math.max(rows, cols)))) : 46;
        const rowLabelsWidth = big ? 22 : (labels || []).some((l) => String(l).length > 2) ? 70 : 30;
        const short = Array.from({ length: cols }, (_, j) => (labels && labels[j]) || String(j))
            .every((l) => l.length <= 2);
        const top = big || short ? 42 : 80;
        const width = rowLabelsWidth + cols * cell + 8;
        const height = top + rows * cell + 8;
        const max = weights.flat().reduce((m, w) => (Number.isFinite(w) ? Math.max(m, w) : m), 0) || 1;
        const map = svg("svg", { class: "play-heatmap", viewBox: "0 0 " + width + " " + height,
            width: width, height: height, role: "img", "aria-label": title });
        map.append(svg("rect", { x: 0, y: 0, width: width, height: height, fill: "white" }));
        map.append(svg("text", { x: rowLabelsWidth, y: 14, class: "play-heatmap-title" }, title));
        const label = (i) => (labels && labels[i] !== undefined ? labels[i] : String(i));
        const slanted = !big && Array.from({ length: cols }, (_, j) => label(j)).some((l) => l.length > 2);
        for (let j = 0; j < cols; j++) {
            const x = rowLabelsWidth + j * cell + cell / 2;
            const y = top - 6;
            map.append(svg("text", { x: x, y: y, class: "play-heatmap-label",
                transform: slanted ? "rotate(-40 " + x + " " + y + ")" : "",
                "text-anchor": slanted ? "start" : "middle" }, visible(label(j))));
        }
        for (let i = 0; i < rows; i++) {
            const y = top + i * cell;
            map.append(svg("text", { x: rowLabelsWidth - 6, y: y + cell / 2 + 4, class: "play-heatmap-label",
                "text-anchor": "end" }, visible(label(i))));
            for (let j = 0; j < cols; j++) {
                const w = weights[i][j];
                const x = rowLabelsWidth + j * cell;
                const fraction = Number.isFinite(w) ? w / max : 0;
                const masked = causal && j > i; // the future, which the causal mask hides
                const rect = svg("rect", { x: x, y: y, width: cell, height: cell,
                    fill: masked ? MASKED : blue(fraction), stroke: "white" });
                rect.append(svg("title", {}, label(i) + " → " + label(j) + ": " + formatWeight(w)));
                map.append(rect);
                if (!big && !masked) {
                    map.append(svg("text", { x: x + cell / 2, y: y + cell / 2 + 4, "text-anchor": "middle",
                        class: "play-heatmap-value", fill: fraction > 0.55 ? "white" : "#222" },
                    formatWeight(w, 2)));
                }
            }
        }
        if (highlightRow >= 0 && highlightRow < rows) {
            map.append(svg("rect", { x: rowLabelsWidth, y: top + highlightRow * cell, width: cols * cell,
                height: cell, fill: "none", stroke: "#d95f02", "stroke-width": 3 }));
        }
        return map;
    }

    /** A prompt's character as a label: space and line break made visible. */
    function visible(text) {
        return text === " " ? "␣" : text === "\n" ? "⏎" : text;
    }

    function formatWeight(w, digits) {
        return Number.isFinite(w) ? w.toFixed(digits === undefined ? 4 : digits) : String(w);
    }

    // ---------------------------------------------------------------------------------------------
    // Stages 1-4: "Run it here".

    const KNOBS = {
        query: { caption: "knob_query", param: "query" },
        dropout: { caption: "knob_dropout", param: "dropout" },
        heads: { caption: "knob_heads", param: "heads" },
    };

    class StagePanel extends Panel {
        constructor(node) {
            super(node);
            this.stage = node.dataset.stage;
            this.engine = new Engine();
            this.seed = textInput("play-seed", PARAMS.get("seed") || "", {
                placeholder: node.dataset.seeds ? t("seed_placeholder", { seeds: node.dataset.seeds })
                    : t("seed_unused"),
                title: t("seed_hint"), inputmode: "numeric" });
            this.button = el("button", { type: "button", class: "play-run" }, t("run"));
            this.output = el("pre", { class: "play-output" });
            this.outputCaption = el("span", {});
            this.maps = el("div", { class: "play-heatmaps" });
            const controls = el("div", { class: "play-controls" }, field(t("seed"), this.seed));
            this.knob = this.makeKnob(node.dataset.knob, node.dataset.knobDefault);
            if (this.knob) {
                controls.append(field(t(KNOBS[node.dataset.knob].caption), this.knob));
            }
            controls.append(this.button);
            node.append(controls, this.message, this.maps);
            if (node.dataset.knob === "query") {
                this.queryOutput = el("pre", { class: "play-query-output" });
                this.queryCaption = el("span", {});
                node.append(outputBox(this.queryCaption, this.queryOutput));
            }
            node.append(outputBox(this.outputCaption, this.output));
            this.showCommand();
            this.button.addEventListener("click", () => this.run());
            if (this.knob) {
                this.knob.addEventListener("change", () => this.run());
            }
            for (const input of [this.seed, this.knob]) {
                if (input) {
                    input.addEventListener("keydown", (e) => e.key === "Enter" && this.run());
                }
            }
            if (PARAMS.has("run")) {
                this.run();
            }
        }

        makeKnob(kind, initial) {
            if (!KNOBS[kind]) {
                return null;
            }
            const value = PARAMS.get(KNOBS[kind].param) || initial || "";
            if (kind === "query") {
                const select = el("select", { class: "play-knob" });
                TOKENS.forEach((word, i) => select.append(el("option", { value: String(i) }, word)));
                select.value = TOKENS[Number(value)] !== undefined ? value : "1";
                return select;
            }
            return textInput("play-knob", value, { size: 6 });
        }

        /** The caption says which command prints the same text. */
        showCommand() {
            const seed = this.seed.value.trim();
            const flags = seed ? " -- --seed " + seed : "";
            this.outputCaption.replaceChildren(...rich(t("output", { stage: this.stage, flags: flags })));
            if (this.queryCaption) {
                this.queryCaption.textContent = t("query_output", { word: TOKENS[Number(this.knob.value)] });
            }
        }

        /** The heat maps of stage_weights' JSON, titled in the edition's language. */
        draw({ labels, causal, query, maps }) {
            this.maps.replaceChildren(...maps.map((m) => {
                const head = /^head (\d+)$/.exec(m.title || "");
                const title = head ? t("head", { head: head[1] }) : m.title || t("weights_title");
                const highlightRow = query === undefined ? -1 : query;
                return heatMap(title, labels, m.weights, { causal: causal, highlightRow: highlightRow });
            }));
        }

        async run() {
            this.state("running");
            this.say(t("running"));
            this.button.disabled = true;
            const seed = this.seed.value.trim();
            const knob = this.knob ? this.knob.value.trim() : "";
            const start = performance.now();
            try {
                this.showCommand();
                this.output.textContent = "";
                this.output.textContent = await this.engine.call("stage_output", this.stage, seed);
                if (this.node.dataset.heatmap !== "none") {
                    this.draw(JSON.parse(await this.engine.call("stage_weights", this.stage, seed, knob)));
                }
                if (this.queryOutput) {
                    this.queryOutput.textContent = await this.engine.call("s1_query", Number(knob));
                }
                this.say(t("done", { ms: Math.round(performance.now() - start) }));
                this.state("done");
            } catch (error) {
                this.maps.replaceChildren(); // nothing is left from another seed or knob
                if (this.queryOutput) {
                    this.queryOutput.textContent = "";
                }
                this.failed(error);
            } finally {
                this.button.disabled = false;
            }
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Stage 5: "Train it here".

    /** One training run in its own worker, with its own losses, samples and curve. */
    class TrainRun {
        /** `threads`: this run's share of the machine's cores. */
        constructor(flags, label, colour, threads) {
            this.flags = flags;
            this.threadsWanted = threads;
            this.label = label;
            this.colour = colour;
            this.engine = new Engine();
            this.header = "";
            this.losses = [];
            this.steps = 0;
            this.computeMs = 0; // time spent inside Trainer.run, for the steps per second
            this.chunk = 5; // steps per call, grown to about a quarter of a second
            this.lossesPre = el("pre", { class: "play-losses", "data-flags": flags });
            this.samples = el("div", { class: "play-samples" });
            this.box = el("div", { class: "play-run-box" });
        }

        async open() {
            const { header, steps, total, kernel, threads, oneThread } = await this.engine.call("trainer_new", this.flags,
                this.threadsWanted);
            this.header = header.endsWith("\n") ? header : header + "\n";
            this.steps = steps;
            this.total = total;
            this.kernel = kernel; // the product kernel the worker chose: "fused" or "f64"
            this.threads = threads;
            this.oneThread = oneThread; // for one thread, why (a key of threads_why_…)
            this.lossesPre.textContent = this.header;
        }

        rate() {
            return this.computeMs > 0 ? this.steps / (this.computeMs / 1000) : 0;
        }

        lastLoss() {
            return this.losses.length ? this.losses[this.losses.length - 1].toFixed(4) : "–";
        }

        /** Trains until `target`, a quarter of a second per call, while keepGoing() says so. */
        async train(target, keepGoing, onProgress) {
            while (this.steps < target && keepGoing()) {
                const toSample = SAMPLE_EVERY - (this.steps % SAMPLE_EVERY);
                const n = Math.max(1, Math.min(this.chunk, target - this.steps, toSample));
                const { value, ms } = await this.engine.timed("trainer_run", n);
                this.computeMs += ms;
                this.chunk = Math.max(1, Math.min(500, Math.round(n * (250 / Math.max(ms, 1)))));
                this.add(value.lines);
                const before = this.steps;
                this.steps = value.steps;
                if (this.steps === before) {
                    break; // the schedule's last step is behind us
                }
                onProgress();
                if (this.steps % SAMPLE_EVERY === 0) {
                    await this.sample();
                }
            }
        }

        add(lines) {
            if (!lines) {
                return;
            }
            const text = lines.endsWith("\n") ? lines : lines + "\n";
            this.lossesPre.append(text);
            for (const line of text.split("\n")) {
                const loss = Number(line.split(",")[2]);
                if (line && Number.isFinite(loss)) {
                    this.losses.push(loss);
                }
            }
        }

        /** The mean loss over the test batches, as the chapter's run prints it after `loss: `. */
        testLoss() {
            return this.engine.call("trainer_test_loss");
        }

        async sample() {
            const text = await this.engine.call("trainer_sample", SAMPLE_LENGTH);
            const entry = el("div", { class: "play-sample" },
                el("div", { class: "play-sample-step" }, t("sample_at", { step: this.steps })),
                el("pre", { class: "play-sample-text" }, text));
            this.samples.prepend(entry);
        }

        stop() {
            this.engine.stop();
        }
    }

    /** The loss curves of the runs, as one SVG chart redrawn after every call. */
    function lossChart(runs) {
        const width = 640;
        const height = 260;
        const left = 56;
        const right = 12;
        const top = 24;
        const bottom = 34;
        const steps = Math.max(10, ...runs.map((r) => r.losses.length));
        const all = runs.flatMap((r) => r.losses);
        const high = all.length ? Math.max(...all) : 4.5;
        const low = all.length ? Math.min(...all) : 0;
        const pad = (high - low) * 0.05 || 0.5;
        const yMax = high + pad;
        const yMin = Math.max(0, low - pad);
        const x = (step) => left + ((width - left - right) * step) / steps;
        const y = (loss) => top + ((height - top - bottom) * (yMax - loss)) / (yMax - yMin);
        const chart = svg("svg", { class: "play-loss-chart", viewBox: "0 0 " + width + " " + height,
            role: "img", "aria-label": t("loss_curve") });
        chart.append(svg("rect", { x: 0, y: 0, width: width, height: height, fill: "white" }));
        chart.append(svg("text", { x: left, y: 15, class: "play-chart-title" }, t("loss_curve")));
        for (let i = 0; i <= 4; i++) {
            const loss = yMin + ((yMax - yMin) * i) / 4;
            chart.append(svg("line", { x1: left, x2: width - right, y1: y(loss), y2: y(loss), class: "play-grid" }));
            chart.append(svg("text", { x: left - 6, y: y(loss) + 4, "text-anchor": "end", class: "play-tick" },
                loss.toFixed(2)));
        }
        const every = niceStep(steps / 5);
        for (let step = 0; step <= steps; step += every) {
            chart.append(svg("text", { x: x(step), y: height - bottom + 16, "text-anchor": "middle",
                class: "play-tick" }, String(step)));
        }
        chart.append(svg("text", { x: (left + width - right) / 2, y: height - 4, "text-anchor": "middle",
            class: "play-tick" }, t("loss_axis_step")));
        chart.append(svg("text", { x: 12, y: top + (height - top - bottom) / 2, "text-anchor": "middle",
            class: "play-tick", transform: "rotate(-90 12 " + (top + (height - top - bottom) / 2) + ")" },
        t("loss_axis_loss")));
        runs.forEach((run, k) => {
            chart.append(svg("polyline", { points: curvePoints(run.losses, x, y), fill: "none",
                stroke: run.colour, "stroke-width": 1.2, "stroke-linejoin": "round" }));
            if (runs.length > 1) {
                chart.append(svg("text", { x: width - right - 4, y: top + 14 + 16 * k, "text-anchor": "end",
                    fill: run.colour, class: "play-tick" }, run.label));
            }
        });
        return chart;
    }

    /** A round step (1, 2 or 5 times a power of ten) near `rough`, for the axis labels. */
    function niceStep(rough) {
        const power = 10 ** Math.floor(Math.log10(Math.max(rough, 1)));
        const step = [1, 2, 5, 10].map((m) => m * power).find((m) => m >= rough);
        return Math.max(1, step);
    }

    /** At most about 600 points: each one the mean loss of its steps, so that a long run still draws fast. */
    function curvePoints(losses, x, y) {
        const per = Math.max(1, Math.ceil(losses.length / 600));
        const points = [];
        for (let i = 0; i < losses.length; i += per) {
            const part = losses.slice(i, i + per);
            const mean = part.reduce((a, b) => a + b, 0) / part.length;
            points.push(x(i + part.length).toFixed(1) + "," + y(mean).toFixed(1));
        }
        return points.join(" ");
    }

    class TrainPanel extends Panel {
        constructor(node) {
            super(node);
            this.runs = [];
            this.going = false;
            const initialMask = PARAMS.get("mask-value");
            this.seed = textInput("play-train-seed", PARAMS.get("seed") || "42", { size: 8 });
            this.steps = textInput("play-steps", PARAMS.get("train") || "1000", { size: 8 });
            this.qkv = checkbox("play-qkv", PARAMS.has("qkv"));
            this.heads = textInput("play-heads", PARAMS.get("heads") || "", { size: 4, placeholder: "1" });
            this.residual = checkbox("play-residual", PARAMS.has("residual"));
            this.layerNorm = checkbox("play-layer-norm", PARAMS.has("layer-norm"));
            this.dropout = textInput("play-dropout", PARAMS.get("dropout") || "", { size: 5, placeholder: "0" });
            this.mask = el("select", { class: "play-mask" },
                el("option", { value: "-1e9" }, t("mask_tutorial")),
                el("option", { value: "0" }, t("mask_zero")),
                el("option", { value: "both" }, t("mask_both")));
            if (initialMask !== null && !["-1e9", "0", "both"].includes(initialMask)) {
                this.mask.append(el("option", { value: initialMask }, initialMask));
            }
            this.mask.value = initialMask !== null ? initialMask : "-1e9";
            this.startButton = el("button", { type: "button", class: "play-start" }, t("start"));
            this.wholeButton = el("button", { type: "button", class: "play-whole" }, t("whole_chapter"));
            this.resetButton = el("button", { type: "button", class: "play-reset" }, t("reset"));
            this.status = el("p", { class: "play-status" }, t("status_idle"));
            this.engineLine = el("p", { class: "play-engine" });
            this.testLine = el("p", { class: "play-test-loss" });
            this.wantTest = PARAMS.has("test"); // the test loss after the run, as the chapter's run prints it
            this.command = el("code", { class: "play-command" });
            this.chart = el("div", { class: "play-chart" }, lossChart([]));
            this.boxes = el("div", { class: "play-run-boxes" });
            const controls = el("div", { class: "play-controls" },
                field(t("train_seed"), this.seed), field(t("steps"), this.steps),
                field(t("heads"), this.heads), field(t("dropout"), this.dropout),
                field(t("mask_value"), this.mask));
            const switches = el("div", { class: "play-controls play-switches" },
                field(t("qkv"), this.qkv, "play-check"), field(t("residual"), this.residual, "play-check"),
                field(t("layer_norm"), this.layerNorm, "play-check"));
            const buttons = el("div", { class: "play-controls" }, this.startButton, this.wholeButton,
                this.resetButton);
            node.append(controls, switches, buttons,
                el("p", { class: "play-command-line" }, this.command), this.message, this.status, this.engineLine,
                this.testLine, this.chart, this.boxes);
            for (const input of this.settings()) {
                input.addEventListener("change", () => this.settingsChanged());
            }
            this.startButton.addEventListener("click", () => (this.going ? this.pause() : this.start()));
            this.wholeButton.addEventListener("click", () => this.wholeChapter());
            this.resetButton.addEventListener("click", () => this.reset());
            this.settingsChanged();
            if (PARAMS.has("train")) {
                this.start();
            }
        }

        /** The fields that make a run, and the whole-chapter button; they are locked while it trains. */
        settings() {
            return [this.seed, this.steps, this.qkv, this.heads, this.residual, this.layerNorm, this.dropout,
                this.mask, this.wholeButton];
        }

        /**
         * The chapter's run: its flags (seed 42, the tutorial's model), every step of its schedule (the
         * trainer's total, two epochs), then the test loss, which the chapter prints after `loss:`.
         */
        async wholeChapter() {
            this.seed.value = "42";
            [this.qkv, this.residual, this.layerNorm].forEach((box) => (box.checked = false));
            [this.heads, this.dropout].forEach((input) => (input.value = ""));
            this.mask.value = "-1e9";
            try {
                await this.open();
            } catch (error) {
                this.failed(error, "no_corpus");
                return;
            }
            this.steps.value = String(this.runs[0].total);
            this.settingsChanged();
            this.wantTest = true;
            await this.start();
        }

        /** The command-line flags of one run, with the command line's own names. */
        flags(maskValue) {
            const parts = ["--seed", this.seed.value.trim()];
            if (this.qkv.checked) {
                parts.push("--qkv");
            }
            if (this.heads.value.trim()) {
                parts.push("--heads", this.heads.value.trim());
            }
            if (this.residual.checked) {
                parts.push("--residual");
            }
            if (this.layerNorm.checked) {
                parts.push("--layer-norm");
            }
            if (this.dropout.value.trim()) {
                parts.push("--dropout", this.dropout.value.trim());
            }
            if (maskValue !== "-1e9") {
                parts.push("--mask-value", maskValue);
            }
            return parts.join(" ");
        }

        maskValues() {
            return this.mask.value === "both" ? ["-1e9", "0"] : [this.mask.value];
        }

        settingsChanged() {
            this.command.textContent = this.maskValues().map((v) =>
                "cargo run --release --example s5_gpt -- --max-steps " + this.steps.value.trim() +
                " --loss-csv loss.csv " + this.flags(v)).join("\n");
        }

        /** Whether Start goes on with the runs there are: the same flags, and steps left to train. */
        canGoOn(target) {
            const wanted = this.maskValues().map((v) => this.flags(v));
            return this.runs.length === wanted.length && this.runs.every((run, k) => run.flags === wanted[k]) &&
                this.runs.some((run) => run.steps < Math.min(target, run.total));
        }

        target() {
            const text = this.steps.value.trim();
            const n = Number(text);
            if (!/^\d+$/.test(text) || n < 1) {
                throw new PlayError(t("bad_steps", { value: text }), "input");
            }
            return n;
        }

        async start() {
            let target;
            try {
                target = this.target();
            } catch (error) {
                this.failed(error);
                return;
            }
            this.say("");
            this.testLine.textContent = "";
            this.going = true;
            this.settings().forEach((input) => (input.disabled = true));
            this.startButton.textContent = t("pause");
            this.state("running");
            try {
                if (!this.canGoOn(target)) {
                    await this.open();
                }
                if (!this.going) {
                    return;
                }
                await Promise.all(this.runs.map((run) => run.train(target, () => this.going, () => this.update(target))));
                this.update(target);
                const finished = this.runs.every((r) => r.steps >= Math.min(target, r.total));
                if (finished && this.wantTest) {
                    await this.showTestLoss();
                }
                this.state(finished ? "done" : "paused");
            } catch (error) {
                this.failed(error, "no_corpus");
            } finally {
                this.going = false;
                this.settings().forEach((input) => (input.disabled = false));
                this.startButton.textContent = this.node.dataset.state === "paused" ? t("resume") : t("start");
            }
        }

        /** New runs in new workers, one per mask value, with the current settings. */
        async open() {
            this.stopRuns();
            this.status.textContent = t("status_loading");
            const values = this.maskValues();
            const share = Math.max(1, Math.floor((navigator.hardwareConcurrency || 1) / values.length));
            this.runs = values.map((v, k) =>
                new TrainRun(this.flags(v), t("mask_run", { value: v }), CURVE_COLOURS[k], share));
            this.boxes.replaceChildren(...this.runs.map((run) => {
                run.box.replaceChildren(
                    this.runs.length > 1 ? el("div", { class: "play-run-label", style: "color:" + run.colour },
                        run.label) : "",
                    el("div", { class: "play-output-caption" }, t("samples")), run.samples,
                    outputBox(t("losses"), run.lossesPre));
                return run.box;
            }));
            await Promise.all(this.runs.map((run) => run.open()));
        }

        /** The first run's test loss, under the status line. */
        async showTestLoss() {
            const run = this.runs[0];
            this.testLine.textContent = t("status_testing", { step: run.steps });
            const loss = await run.testLoss();
            this.testLine.replaceChildren(...rich(t("test_loss", { step: run.steps, loss: loss })));
            this.node.dataset.testLoss = loss;
        }

        /** Which product kernel and how many threads the first run trains with. */
        showEngine(run) {
            const kernel = t(run.kernel === "fused" ? "kernel_fused" : "kernel_f64");
            const threads = run.threads > 1 ? t("threads_many", { n: run.threads }) : oneThreadLine(run.oneThread);
            this.engineLine.textContent = t("engine", { kernel: kernel, threads: threads });
            this.node.dataset.kernel = run.kernel;
            this.node.dataset.threads = String(run.threads);
        }

        update(target) {
            const first = this.runs[0];
            this.showEngine(first);
            const key = this.going ? "status_training" : first.steps >= target ? "status_done" : "status_paused";
            const rate = first.rate();
            this.status.replaceChildren(...this.runs.map((run) => el("span", { class: "play-status-line" },
                (this.runs.length > 1 ? run.label + ": " : "") +
                t(key, { step: run.steps, total: target, loss: run.lastLoss(), rate: run.rate().toFixed(1) }))));
            this.node.dataset.stepsPerSecond = rate.toFixed(2);
            this.node.dataset.steps = String(first.steps);
            this.chart.replaceChildren(lossChart(this.runs));
        }

        pause() {
            this.going = false; // the calls under way finish, then the loops stop
        }

        stopRuns() {
            this.runs.forEach((run) => run.stop());
            this.runs = [];
        }

        reset() {
            this.going = false;
            this.stopRuns();
            this.boxes.replaceChildren();
            this.chart.replaceChildren(lossChart([]));
            this.status.textContent = t("status_idle");
            this.engineLine.textContent = "";
            this.testLine.textContent = "";
            this.wantTest = PARAMS.has("test");
            delete this.node.dataset.testLoss;
            this.startButton.textContent = t("start");
            this.say("");
            this.state("idle");
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Stage 5: "Sample the trained model".

    class SamplePanel extends Panel {
        constructor(node) {
            super(node);
            this.engine = new Engine();
            this.loading = null; // the checkpoint's loading, once asked
            this.prompt = el("textarea", { class: "play-prompt", rows: 2, cols: 40, spellcheck: "false" });
            this.prompt.value = PARAMS.has("probs") ? PARAMS.get("probs") :
                PARAMS.has("prompt") ? PARAMS.get("prompt") : "ROMEO:";
            this.temperature = textInput("play-temperature", PARAMS.get("temperature") || "1", { size: 5 });
            this.topK = textInput("play-top-k", PARAMS.get("top-k") || "", { size: 4,
                placeholder: t("top_k_placeholder") });
            this.sampleSeed = textInput("play-sample-seed", PARAMS.get("sample-seed") || "42", { size: 8 });
            this.length = textInput("play-sample-len", PARAMS.get("sample-len") || "300", { size: 5 });
            this.button = el("button", { type: "button", class: "play-generate" }, t("generate"));
            this.info = el("p", { class: "play-checkpoint" });
            this.command = el("code", { class: "play-command" });
            this.output = el("pre", { class: "play-generated" });
            this.maps = el("div", { class: "play-heatmaps play-attention" });
            this.probsCommand = el("code", { class: "play-command" });
            this.probsMessage = el("p", { class: "play-message", role: "status" });
            this.probsChart = el("div", { class: "play-chart play-probs-chart" });
            this.probsMore = el("p", { class: "play-probs-more" });
            this.probsText = el("pre", { class: "play-probs" });
            this.probsSeq = 0; // the latest request; an older answer is dropped
            const probs = el("div", { class: "play-probs-box" },
                el("div", { class: "play-output-caption" }, ...rich(t("probs_title"))),
                el("p", { class: "play-command-line" }, this.probsCommand), this.probsMessage, this.probsChart,
                this.probsMore, el("details", { class: "play-probs-details" },
                    el("summary", { class: "play-output-caption" }, ...rich(t("probs_printed"))), this.probsText));
            const controls = el("div", { class: "play-controls" },
                field(t("temperature"), this.temperature), field(t("top_k"), this.topK),
                field(t("sample_seed"), this.sampleSeed), field(t("sample_len"), this.length), this.button);
            node.append(el("div", { class: "play-controls" }, field(t("prompt"), this.prompt, "play-wide")), controls,
                el("p", { class: "play-command-line" }, this.command), this.message, this.info,
                outputBox(t("generated"), this.output), probs,
                el("div", { class: "play-output-caption" }, t("attention_maps")), this.maps);
            for (const input of [this.prompt, this.temperature, this.topK, this.sampleSeed, this.length]) {
                input.addEventListener("input", () => this.showCommand());
            }
            // The distribution follows the prompt, the temperature and top-k, 150 ms after the last edit.
            for (const input of [this.prompt, this.temperature, this.topK]) {
                input.addEventListener("input", () => {
                    clearTimeout(this.probsTimer);
                    this.probsTimer = setTimeout(() => this.showProbs(), PROBS_DELAY);
                });
            }
            this.button.addEventListener("click", () => this.generate());
            this.showCommand();
            this.node.dataset.probsState = "idle";
            const sampling = ["generate", "prompt", "temperature", "top-k", "sample-seed", "sample-len"];
            if (PARAMS.has("probs")) {
                this.showProbs();
            } else if (sampling.some((name) => PARAMS.has(name))) {
                this.generate();
            } else if ("IntersectionObserver" in window) {
                // The first distribution is drawn when the reader scrolls to the panel (it loads the model).
                const seen = new IntersectionObserver((entries) => {
                    if (entries.some((e) => e.isIntersecting)) {
                        seen.disconnect();
                        this.showProbs();
                    }
                });
                seen.observe(probs);
            }
        }

        /** The checkpoint, loaded into the worker once (again after a crash); its steps are shown. */
        load() {
            if (!this.loading) {
                this.loading = this.engine.call("sampler_new").then((steps) => {
                    this.info.textContent = t("checkpoint_steps", { steps: Number(steps).toLocaleString("en") });
                });
                this.loading.catch(() => (this.loading = null));
            }
            return this.loading;
        }

        showCommand() {
            const quoted = "'" + this.prompt.value.split("'").join("'\\''") + "'";
            const topK = this.topK.value.trim();
            const sampling = "cargo run --release --example s5_gpt -- generate --checkpoint book/src/play/data/checkpoint" +
                " --prompt " + quoted + " --temperature " + this.temperature.value.trim() +
                (topK ? " --top-k " + topK : "");
            this.command.textContent = sampling + " --seed " + this.sampleSeed.value.trim() +
                " --sample-len " + this.length.value.trim();
            this.probsCommand.textContent = sampling + " --probs";
        }

        async generate() {
            this.state("running");
            this.say(t("running"));
            this.button.disabled = true;
            const start = performance.now();
            try {
                const prompt = this.prompt.value;
                const [temperature, topK, seed, length] = [this.temperature, this.topK, this.sampleSeed, this.length]
                    .map((input) => input.value.trim());
                await this.load();
                this.output.textContent = "";
                this.maps.replaceChildren();
                this.output.textContent = await this.engine.call("generate", prompt, temperature, topK, seed, length);
                const attention = JSON.parse(await this.engine.call("attention", prompt));
                this.drawAttention(prompt, attention);
                this.say(t("done", { ms: Math.round(performance.now() - start) }));
                this.state("done");
            } catch (error) {
                if (error.kind === "crash" || error.kind === "unavailable") {
                    this.loading = null;
                }
                this.failed(error, "no_checkpoint");
            } finally {
                this.button.disabled = false;
            }
        }

        /**
         * The distribution of the character after the prompt: `generate --probs`'s lines in full, and
         * the likeliest of them as bars. Bad input shows the command line's own line, and no bars.
         */
        async showProbs() {
            const seq = ++this.probsSeq;
            const [prompt, temperature, topK] = [this.prompt.value, this.temperature.value.trim(),
                this.topK.value.trim()];
            this.node.dataset.probsState = "running";
            try {
                await this.load();
                const text = await this.engine.call("probs", prompt, temperature, topK);
                if (seq !== this.probsSeq) {
                    return; // the reader has edited since
                }
                this.probsText.textContent = text;
                this.drawProbs(text);
                this.probsMessage.replaceChildren();
                this.probsMessage.classList.remove("play-error");
                this.node.dataset.probsState = "done";
            } catch (error) {
                if (error.kind === "crash" || error.kind === "unavailable") {
                    this.loading = null;
                }
                if (seq !== this.probsSeq) {
                    return;
                }
                this.probsText.textContent = "";
                this.probsChart.replaceChildren();
                this.probsMore.textContent = "";
                this.probsMessage.replaceChildren(...rich(messageFor(error, "no_checkpoint")));
                this.probsMessage.classList.add("play-error");
                this.node.dataset.probsState = error.kind === "input" ? "error" : "unavailable";
            }
        }

        /** Bars of the first PROBS_BARS lines (`'c'    0.123`), and a line counting the others. */
        drawProbs(text) {
            const lines = text.split("\n").filter((line) => line);
            const shown = lines.slice(0, PROBS_BARS).map((line) => {
                const at = line.lastIndexOf(" ");
                return { label: line.slice(0, at).trimEnd(), p: line.slice(at + 1) };
            });
            this.probsChart.replaceChildren(probsChart(shown));
            const rest = lines.length - shown.length;
            this.probsMore.textContent = rest > 0 ? t(rest === 1 ? "probs_more_one" : "probs_more", { n: rest }) : "";
        }

        /** One heat map per block and head, the prompt's characters on both axes. */
        drawAttention(prompt, attention) {
            const chars = Array.from(prompt);
            const labels = chars.slice(Math.max(0, chars.length - (attention[0] && attention[0][0]
                ? attention[0][0].length : chars.length)));
            const maps = [];
            attention.forEach((heads, b) => heads.forEach((weights, h) =>
                maps.push(heatMap(t("block_head", { block: b + 1, head: h + 1 }), labels, weights,
                    { causal: true }))));
            this.maps.replaceChildren(...maps);
        }
    }

    /**
     * Horizontal bars, one per character: its label as the command prints it ('e', '\n', ' '), a bar
     * as long as its probability and the probability as printed. The scale ends at the first of 0.01,
     * 0.02, 0.05, 0.1, … 1 that holds the longest bar, and its ticks are drawn on top.
     */
    function probsChart(rows) {
        const left = 52;
        const barWidth = 420;
        const row = 18;
        const top = 24;
        const width = left + barWidth + 96;
        const height = top + rows.length * row + 6;
        const largest = Math.max(0, ...rows.map((r) => Number(r.p)));
        const end = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1].find((m) => m >= largest) || 1;
        const x = (p) => left + (Number(p) / end) * barWidth;
        const chart = svg("svg", { class: "play-probs-bars", viewBox: "0 0 " + width + " " + height,
            width: width, height: height, role: "img", "aria-label": t("probs_chart") });
        chart.append(svg("rect", { x: 0, y: 0, width: width, height: height, fill: "white" }));
        for (const tick of [0, end / 2, end]) {
            chart.append(svg("line", { x1: x(tick), x2: x(tick), y1: top - 4, y2: height - 4, class: "play-grid" }));
            chart.append(svg("text", { x: x(tick), y: top - 8, "text-anchor": "middle", class: "play-tick" },
                String(+tick.toFixed(3))));
        }
        rows.forEach(({ label, p }, i) => {
            const y = top + i * row;
            const tip = Math.max(x(p), left + 0.5);
            chart.append(svg("text", { x: left - 8, y: y + 13, "text-anchor": "end", class: "play-probs-label" },
                label));
            const bar = svg("rect", { x: left, y: y + 2, width: tip - left, height: row - 4, fill: BAR_COLOUR });
            bar.append(svg("title", {}, label + ": " + p));
            chart.append(bar);
            chart.append(svg("text", { x: tip + 6, y: y + 13, class: "play-tick" }, p));
        });
        return chart;
    }

    // ---------------------------------------------------------------------------------------------

    const PANELS = { stage: StagePanel, train: TrainPanel, sample: SamplePanel };

    function setUp() {
        const nodes = document.querySelectorAll(".play-panel[data-play]");
        if (window.location.protocol === "file:") {
            // Browsers refuse module workers and fetches from file:, so the panels cannot run here.
            nodes.forEach((node) => {
                const panel = new Panel(node);
                node.append(panel.message);
                panel.say(t("file_protocol"), true);
                panel.state("unavailable");
            });
            return;
        }
        nodes.forEach((node) => {
            const Kind = PANELS[node.dataset.play];
            if (Kind) {
                new Kind(node);
            }
        });
        // For the browser test and the curious: any export, by name, in a worker of its own.
        const engine = new Engine();
        window.attentionPlay = { call: (op, ...args) => engine.call(op, ...args) };
    }

    if (document.readyState === "loading") {
        document.addEventListener("DOMContentLoaded", setUp);
    } else {
        setUp();
    }
})();
