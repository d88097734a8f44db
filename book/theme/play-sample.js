// The book's panels, part 5 of 9 (see play-engine.js): stage 5, "Sample the trained model". It prints
// what `s5_gpt generate --checkpoint` prints from the book's checkpoint, draws the next character's
// distribution (`generate --probs`) as bars from the front's numbers, and the prompt's attention maps.
(function () {
    "use strict";

    const { PARAMS, t, el, Engine, messageFor, Panel, rich, field, textInput, checkbox, outputBox, heatMap,
        probsChart } = window.attentionPanels;
    const PROBS_BARS = 20; // the likeliest characters drawn as bars; the rest are counted
    const PROBS_DELAY = 150; // ms without an edit before the distribution is asked again

    /** The sampling flag whose clap id is `id`: {flag: "--top-k", default}. */
    function flag(id) {
        return window.attentionPanels.facts.generate_flags[id];
    }

    /** The URL parameter of the sampling flag `id` (the flag without its dashes), or null. */
    function param(id) {
        return PARAMS.get(flag(id).flag.slice(2));
    }

    /** `text` as one word of a POSIX shell: in single quotes, each of its own quotes written '\''. */
    function quoted(text) {
        return "'" + text.split("'").join("'\\''") + "'";
    }

    class SamplePanel extends Panel {
        constructor(node) {
            super(node);
            this.engine = new Engine();
            this.loading = null; // the checkpoint's loading, once asked
            this.own = null; // the reader's own checkpoint, {config, weights}, once chosen; else the book's
            this.prompt = el("textarea", { class: "play-prompt", rows: 2, cols: 40, spellcheck: "false" });
            this.prompt.value = PARAMS.has("probs") ? PARAMS.get("probs") :
                param("prompt") !== null ? param("prompt") : flag("prompt").default;
            this.temperature = textInput("play-temperature", param("temperature") || flag("temperature").default,
                { size: 5 });
            this.topK = textInput("play-top-k", param("top_k") || "", { size: 4,
                placeholder: t("top_k_placeholder") });
            // The sampling seed's parameter is sample-seed: seed is the training panel's.
            this.sampleSeed = textInput("play-sample-seed", PARAMS.get("sample-seed") || flag("seed").default,
                { size: 8 });
            this.length = textInput("play-sample-len", param("sample_len") || "300", { size: 5 });
            // `--no-cache`: the same text, each window computed again; the time it takes says what the
            // KV cache saves (stage 7).
            this.noCache = checkbox("play-no-cache", PARAMS.has(flag("no_cache").flag.slice(2)));
            this.button = el("button", { type: "button", class: "play-generate" }, t("generate"));
            // A checkpoint of the reader's: the two files that `s5_gpt train --save DIR` writes and
            // `generate` reads, trained with any of the flags (a variant of stage 7's too).
            // The browser's own file button speaks the browser's language: a button of the edition's
            // opens it instead, and the names chosen are shown beside it.
            this.files = el("input", { type: "file", class: "play-checkpoint-files", multiple: true,
                accept: ".json,.safetensors", hidden: true });
            this.filesButton = el("button", { type: "button", class: "play-choose-files" }, t("own_checkpoint_choose"));
            this.filesChosen = el("span", { class: "play-files-chosen" }, t("own_checkpoint_none"));
            this.filesButton.addEventListener("click", () => this.files.click());
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
            const switches = el("div", { class: "play-controls play-switches" },
                field(t("no_cache", { flag: flag("no_cache").flag }), this.noCache, "play-check"));
            const own = el("div", { class: "play-controls play-own-checkpoint" },
                el("span", { class: "play-caption" }, ...rich(t("own_checkpoint"))), this.files, this.filesButton,
                this.filesChosen);
            node.append(el("div", { class: "play-controls" }, field(t("prompt"), this.prompt, "play-wide")), controls,
                switches, own,
                el("p", { class: "play-command-line" }, this.command), this.message, this.info,
                outputBox(t("generated"), this.output), probs,
                el("div", { class: "play-output-caption" }, t("attention_maps")), this.maps);
            for (const input of [this.prompt, this.temperature, this.topK, this.sampleSeed, this.length]) {
                input.addEventListener("input", () => this.showCommand());
            }
            this.noCache.addEventListener("change", () => this.showCommand());
            this.files.addEventListener("change", () => this.useFiles());
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
            const sampling = ["prompt", "temperature", "top_k", "sample_len", "no_cache"]
                .map((id) => flag(id).flag.slice(2));
            if (PARAMS.has("probs")) {
                this.showProbs();
            } else if (["generate", "sample-seed", ...sampling].some((name) => PARAMS.has(name))) {
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

        /**
         * The checkpoint, loaded into the worker once (again after a crash, or when the reader chooses
         * files): the book's, or the reader's own; its steps are shown.
         */
        load() {
            if (!this.loading) {
                const own = this.own;
                const loaded = own ? this.engine.call("sampler_from", own.config, own.weights)
                    : this.engine.call("sampler_new");
                this.loading = loaded.then((steps) => {
                    const key = own ? "checkpoint_own_steps" : "checkpoint_steps";
                    this.info.textContent = t(key, { steps: Number(steps).toLocaleString("en") });
                    this.node.dataset.checkpoint = own ? "own" : "book";
                });
                this.loading.catch(() => (this.loading = null));
            }
            return this.loading;
        }

        /**
         * The reader's files: config.json and model.safetensors, read as `generate --checkpoint DIR` reads
         * that folder; no file chosen is the book's checkpoint again. The distribution is drawn anew.
         */
        async useFiles() {
            const files = [...this.files.files];
            this.filesChosen.textContent = files.length ? files.map((file) => file.name).join(", ")
                : t("own_checkpoint_none");
            const named = (name) => files.find((file) => file.name === name);
            const [config, weights] = [named("config.json"), named("model.safetensors")];
            if (files.length && !(config && weights)) {
                this.say(t("own_checkpoint_files"), true);
                this.state("error");
                return;
            }
            // The worker keeps one checkpoint: the one being loaded goes in first.
            await (this.loading || Promise.resolve()).catch(() => null);
            this.own = files.length ? { config: await config.text(),
                weights: new Uint8Array(await weights.arrayBuffer()) } : null;
            this.loading = null;
            this.info.textContent = "";
            this.output.textContent = "";
            this.maps.replaceChildren();
            this.say("");
            this.state("idle");
            this.showCommand();
            this.showProbs();
        }

        /** The commands that print the same, with the command line's own names (the front's). */
        showCommand() {
            const { example, generate, checkpoint } = window.attentionPanels.facts;
            const topK = this.topK.value.trim();
            const sampling = ["cargo run --release --example", example, "--", generate, flag("checkpoint").flag,
                this.own ? "DIR" : checkpoint, flag("prompt").flag, quoted(this.prompt.value), flag("temperature").flag,
                this.temperature.value.trim(), ...(topK ? [flag("top_k").flag, topK] : [])].join(" ");
            const noCache = this.noCache.checked ? [flag("no_cache").flag] : [];
            this.command.textContent = [sampling, flag("seed").flag, this.sampleSeed.value.trim(),
                flag("sample_len").flag, this.length.value.trim(), ...noCache].join(" ");
            this.probsCommand.textContent = sampling + " " + flag("probs").flag;
        }

        async generate() {
            this.running();
            const start = performance.now();
            try {
                const prompt = this.prompt.value;
                const [temperature, topK, seed, length] = [this.temperature, this.topK, this.sampleSeed, this.length]
                    .map((input) => input.value.trim());
                await this.load();
                this.output.textContent = "";
                this.maps.replaceChildren();
                this.output.textContent = await this.engine.call("generate", prompt, temperature, topK, seed, length,
                    this.noCache.checked);
                this.drawAttention(await this.engine.call("attention", prompt));
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
                const { text, rows } = await this.engine.call("probs", prompt, temperature, topK);
                if (seq !== this.probsSeq) {
                    return; // the reader has edited since
                }
                this.probsText.textContent = text;
                this.drawProbs(rows);
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

        /** Bars of the first PROBS_BARS rows of the distribution, and a line counting the others. */
        drawProbs(rows) {
            const shown = rows.slice(0, PROBS_BARS);
            this.probsChart.replaceChildren(probsChart(shown));
            const rest = rows.length - shown.length;
            this.probsMore.textContent = rest > 0 ? t(rest === 1 ? "probs_more_one" : "probs_more", { n: rest }) : "";
        }

        /**
         * One heat map per block and head, the characters of the model's window on both axes, the keys
         * its mask hides greyed (the future, and with a sliding window the old past).
         */
        drawAttention({ labels, mask, maps: attention }) {
            const maps = [];
            attention.forEach((heads, b) => heads.forEach((weights, h) =>
                maps.push(heatMap(t("block_head", { block: b + 1, head: h + 1 }), labels, weights,
                    { causal: true, mask: mask }))));
            this.maps.replaceChildren(...maps);
        }
    }

    window.attentionPanels.kinds.sample = SamplePanel;
})();
