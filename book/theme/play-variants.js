// The book's panels, part 8 of 9 (see play-engine.js): stage 7, each variant's first block on a prompt.
// It runs `cargo run --example s7_variants -- --weights PROMPT [--variant NAME]` on the reader's prompt and
// draws, for each variant of the chapter's model (untrained, from its seed), the first block's mask and
// each head's weights as heat maps, from the numbers the front returns beside the text it prints; the text
// is shown below them. The variants, their names and the flags come from the front's page_facts(), so a
// variant added to the crate's list appears here too.
// URL parameters: s7_variants.html?weights=O%20Romeo&variant=swa
(function () {
    "use strict";

    const { PARAMS, t, el, Engine, Panel, rich, commandFlags, field, textInput, outputBox, heatMap } = window.attentionPanels;
    const facts = () => window.attentionPanels.facts;
    const MAX_CELL = 16; // pixels: a variant's mask and three heads side by side on a page's width

    /** The flag of `s7_variants` whose clap id is `id`: {flag: "--weights", …}. */
    function flag(id) {
        return facts().variants_flags[id];
    }


    class VariantsPanel extends Panel {
        constructor(node) {
            super(node);
            this.engine = new Engine();
            const [weights, variant] = [flag("weights").flag, flag("variant").flag];
            this.prompt = textInput("play-weights-prompt",
                PARAMS.has(weights.slice(2)) ? PARAMS.get(weights.slice(2)) : facts().weights_prompt,
                { size: 34, "data-flag": weights });
            this.variant = el("select", { class: "play-weights-variant", "data-flag": variant },
                el("option", { value: "" }, t("weights_every")),
                ...facts().variants.map(({ name, short }) => el("option", { value: short }, name)));
            const wanted = PARAMS.get(variant.slice(2));
            if (wanted !== null && !facts().variants.some((v) => v.short === wanted)) {
                this.variant.append(el("option", { value: wanted }, wanted)); // refused, with the command's line
            }
            this.variant.value = wanted || "";
            this.button = el("button", { type: "button", class: "play-run" }, t("run"));
            const controls = el("div", { class: "play-controls" },
                field(t("weights_prompt", { flag: weights }), this.prompt),
                field(t("weights_variant", { flag: variant }), this.variant), this.button);
            this.maps = el("div", { class: "play-variant-maps" });
            this.outputCaption = el("span", {});
            this.output = el("pre", { class: "play-output" });
            node.append(controls, this.message, this.maps, outputBox(this.outputCaption, this.output));
            const chosen = this.variant.value ? [variant, this.variant.value] : [];
            this.showCommand([weights, this.prompt.value, ...chosen]);
            this.button.addEventListener("click", () => this.run());
            this.prompt.addEventListener("keydown", (e) => e.key === "Enter" && this.run());
            this.variant.addEventListener("change", () => this.run());
            if (PARAMS.has(weights.slice(2)) || PARAMS.has(variant.slice(2))) {
                this.run();
            } else if ("IntersectionObserver" in window) {
                // The chapter's prompt is drawn when the reader scrolls to the panel.
                const seen = new IntersectionObserver((entries) => {
                    if (entries.some((e) => e.isIntersecting)) {
                        seen.disconnect();
                        this.run();
                    }
                });
                seen.observe(node);
            }
        }

        /** The caption says which command prints the same text. */
        showCommand(flags) {
            const words = commandFlags(flags);
            this.outputCaption.replaceChildren(...rich(t("output", { stage: facts().kv_example, flags: words })));
        }

        async run() {
            this.running();
            this.output.textContent = "";
            this.maps.replaceChildren();
            try {
                const start = performance.now();
                const { value } = await this.engine.timed("s7_weights", this.prompt.value, this.variant.value);
                this.say(t("done", { ms: Math.round(performance.now() - start) }));
                this.showCommand(value.flags);
                this.output.textContent = value.output;
                this.draw(value);
                this.state("done");
            } catch (error) {
                this.failed(error);
            } finally {
                this.button.disabled = false;
            }
        }

        /** For each variant: its name, then its mask and each head's weights, the hidden keys greyed. */
        draw({ labels, variants }) {
            this.maps.replaceChildren(...variants.map(({ name, short, mask, heads }) => {
                const ones = mask.map((row) => row.map((seen) => (seen ? 1 : 0)));
                const options = { mask: mask, maxCell: MAX_CELL };
                const pictures = [heatMap(t("weights_mask"), labels, ones, { ...options, values: false }),
                    ...heads.map((weights, h) => heatMap(t("head", { head: h + 1 }), labels, weights, options))];
                return el("div", { class: "play-variant", "data-variant": short },
                    el("div", { class: "play-output-caption" }, ...rich(t("weights_caption", { name, short }))),
                    el("div", { class: "play-heatmaps" }, ...pictures));
            }));
        }
    }

    window.attentionPanels.kinds.variants = VariantsPanel;
})();
