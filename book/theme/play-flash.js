// The book's panels, part 6 of 9 (see play-engine.js): stage 6, "Run it here". The panel runs the
// online softmax on the reader's scores, a step at a time, and tiled attention at the reader's T and
// tile, and prints what `cargo run --example s6_flash -- --scores … --context T --tile N` prints. The
// time is the page's own: the browser's clock around the call, which the command line does not print.
// URL parameters: s6_flash.html?scores=0.9,1.5&context=1000&tile=48&run
(function () {
    "use strict";

    const { PARAMS, t, el, Engine, Panel, rich, commandFlags, field, textInput, outputBox } = window.attentionPanels;
    const facts = () => window.attentionPanels.facts;

    /** `8000000 bytes (7.63 MiB)`, in KiB below a MiB, in the edition's words. */
    function bytes(n) {
        const size = n < 1 << 20 ? (n / 1024).toFixed(2) + " KiB" : (n / (1 << 20)).toFixed(2) + " MiB";
        return t("flash_bytes", { n: n, size: size });
    }


    class FlashPanel extends Panel {
        constructor(node) {
            super(node);
            this.engine = new Engine();
            const flags = facts().flash_flags;
            this.scores = textInput("play-flash-scores", PARAMS.get("scores") || "",
                { placeholder: t("flash_scores_placeholder"), size: 28 });
            this.context = textInput("play-flash-context", PARAMS.get("context") || "",
                { placeholder: "256", size: 6, inputmode: "numeric" });
            this.tile = textInput("play-flash-tile", PARAMS.get("tile") || "",
                { placeholder: "64", size: 5, inputmode: "numeric" });
            this.button = el("button", { type: "button", class: "play-run" }, t("run"));
            const controls = el("div", { class: "play-controls" },
                field(t("flash_scores", { flag: flags.scores.flag }), this.scores, "play-wide"),
                field(t("flash_context", { flag: flags.context.flag, max: facts().flash_max_context }), this.context),
                field(t("flash_tile", { flag: flags.tile.flag }), this.tile),
                this.button);
            // The walk, one step at a time: the step's cell as the command line prints it.
            this.stepCaption = el("span", {});
            this.step = el("pre", { class: "play-flash-step" });
            this.next = el("button", { type: "button", class: "play-flash-next", disabled: true }, t("flash_next"));
            this.first = el("button", { type: "button", class: "play-flash-first", disabled: true }, t("flash_first"));
            this.walkBox = el("div", { class: "play-output-box play-flash-walk" },
                el("div", { class: "play-output-caption" }, this.stepCaption, " ", this.first, " ", this.next),
                this.step);
            this.difference = el("p", { class: "play-status play-flash-difference" });
            this.memory = el("p", { class: "play-status play-flash-memory" });
            this.time = el("p", { class: "play-status play-flash-time" });
            this.outputCaption = el("span", {});
            this.output = el("pre", { class: "play-output" });
            node.append(controls, this.message, this.walkBox, this.difference, this.memory, this.time,
                outputBox(this.outputCaption, this.output));
            this.steps = [];
            this.showCommand([]);
            this.button.addEventListener("click", () => this.run());
            this.next.addEventListener("click", () => this.showStep(this.shown + 1));
            this.first.addEventListener("click", () => this.showStep(0));
            for (const input of [this.scores, this.context, this.tile]) {
                input.addEventListener("keydown", (e) => e.key === "Enter" && this.run());
            }
            if (PARAMS.has("run")) {
                this.run();
            }
        }

        /** The caption says which command prints the same text. */
        showCommand(flags) {
            const words = commandFlags(flags);
            this.outputCaption.replaceChildren(...rich(t("output", { stage: "s6_flash", flags: words })));
        }

        /** Shows step `n` (from 0) of the walk. */
        showStep(n) {
            this.shown = Math.max(0, Math.min(n, this.steps.length - 1));
            const lines = this.steps[this.shown] || [];
            this.step.textContent = lines.join("\n");
            this.stepCaption.textContent = this.steps.length
                ? t("flash_walk", { step: this.shown + 1, steps: this.steps.length }) : "";
            this.next.disabled = this.shown >= this.steps.length - 1;
            this.first.disabled = this.shown === 0;
            this.node.dataset.step = String(this.shown + 1);
        }

        /** The comparison's numbers, and the page's own time, in the edition's words. */
        showSummary(length, ms) {
            const scaled = (d) => d.scaled_ulps.toFixed(1);
            const absolute = (x) => x.toExponential(1).replace("e+", "e"); // as the command line writes it
            this.difference.textContent = t("flash_difference", {
                t: length.t, br: length.br, bc: length.bc, tiled: scaled(length.tiled),
                tiled_abs: absolute(length.tiled.absolute), exact: scaled(length.exact),
                exact_abs: absolute(length.exact.absolute),
            });
            this.memory.textContent = t("flash_memory", { naive: bytes(length.naive_bytes), tiled: bytes(length.tiled_bytes) });
            this.time.replaceChildren(...rich(t("flash_time", { ms: ms.toFixed(1), t: length.t })));
        }

        clear() {
            this.steps = [];
            this.showStep(0);
            this.output.textContent = "";
            for (const line of [this.difference, this.memory, this.time]) {
                line.textContent = "";
            }
        }

        async run() {
            this.running();
            const [scores, context, tile] = [this.scores, this.context, this.tile].map((i) => i.value.trim());
            this.clear();
            try {
                const start = performance.now();
                const { value, ms } = await this.engine.timed("s6_output", scores, context, tile);
                this.say(t("done", { ms: Math.round(performance.now() - start) }));
                this.showCommand(value.flags);
                this.output.textContent = value.output;
                this.steps = value.steps;
                this.showStep(0);
                this.showSummary(value.length, ms);
                this.state("done");
            } catch (error) {
                this.showCommand([]);
                this.failed(error);
            } finally {
                this.button.disabled = false;
            }
        }
    }

    window.attentionPanels.kinds.flash = FlashPanel;
})();
