// The book's panels, part 3 of 9 (see play-engine.js): stages 1-4, "Run it here". A panel prints what
// `cargo run --example sN` prints, and draws the weights of the chapter's heat maps.
(function () {
    "use strict";

    const { PARAMS, t, el, Engine, Panel, rich, field, textInput, outputBox, heatMap } = window.attentionPanels;
    const facts = () => window.attentionPanels.facts;

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
                const { tokens, journey } = facts();
                const select = el("select", { class: "play-knob" });
                tokens.forEach((word, i) => select.append(el("option", { value: String(i) }, word)));
                select.value = tokens[Number(value)] !== undefined ? value : String(journey);
                return select;
            }
            return textInput("play-knob", value, { size: 6 });
        }

        /** The caption says which command prints the same text. */
        showCommand() {
            const seed = this.seed.value.trim();
            const flags = seed ? " -- " + facts().stage_flags.seed.flag + " " + seed : "";
            this.outputCaption.replaceChildren(...rich(t("output", { stage: this.stage, flags: flags })));
            if (this.queryCaption) {
                this.queryCaption.textContent = t("query_output", { word: facts().tokens[Number(this.knob.value)] });
            }
        }

        /** The heat maps of stage_weights, titled in the edition's language: by head where there are several. */
        draw({ labels, causal, query, maps }) {
            this.maps.replaceChildren(...maps.map((m) => {
                const title = m.head !== undefined ? t("head", { head: m.head }) : t("weights_title");
                const highlightRow = query === undefined ? -1 : query;
                return heatMap(title, labels, m.weights, { causal: causal, highlightRow: highlightRow });
            }));
        }

        async run() {
            this.running();
            const seed = this.seed.value.trim();
            const knob = this.knob ? this.knob.value.trim() : "";
            const start = performance.now();
            try {
                this.showCommand();
                this.output.textContent = "";
                this.output.textContent = await this.engine.call("stage_output", this.stage, seed);
                if (this.node.dataset.heatmap !== "none") {
                    this.draw(await this.engine.call("stage_weights", this.stage, seed, knob));
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

    window.attentionPanels.kinds.stage = StagePanel;
})();
