// The book's panels, part 7 of 9 (see play-engine.js): stage 7, "Run it here". The panel is the
// KV-memory calculator: it runs `cargo run --example s7_variants -- --kv --layers N …` on the
// reader's sizes and shows what it prints, three lines: the bytes per token, the tokens kept and the
// whole cache. The flags, their order and their defaults come from the front's page_facts().
// URL parameters: s7_variants.html?layers=48&heads=24&kv-heads=24&latent=1024&tokens=8192&run
(function () {
    "use strict";

    const { PARAMS, t, el, Engine, Panel, rich, commandFlags, field, textInput, outputBox } = window.attentionPanels;
    const facts = () => window.attentionPanels.facts;
    // The calculator's sizes by clap's id, in the order of the command line's help.
    const SIZES = ["layers", "heads", "kv_heads", "head_dim", "tokens", "window", "latent", "bytes"];


    class KvPanel extends Panel {
        constructor(node) {
            super(node);
            this.engine = new Engine();
            const flags = facts().kv_flags;
            this.fields = SIZES.filter((id) => flags[id]).map((id) => {
                const flag = flags[id].flag;
                const name = flag.replace(/^--/, "");
                const placeholder = flags[id].default !== undefined ? flags[id].default : t("kv_" + id + "_none");
                const input = textInput("play-kv-" + name, PARAMS.get(name) || "",
                    { placeholder: placeholder, size: 8, inputmode: "numeric", "data-flag": flag });
                return { flag, input, caption: t("kv_" + id, { flag: flag }) };
            });
            this.button = el("button", { type: "button", class: "play-run" }, t("run"));
            const controls = el("div", { class: "play-controls" },
                ...this.fields.map((f) => field(f.caption, f.input)), this.button);
            this.outputCaption = el("span", {});
            this.output = el("pre", { class: "play-output" });
            node.append(controls, this.message, outputBox(this.outputCaption, this.output));
            this.showCommand([flags.kv.flag]);
            this.button.addEventListener("click", () => this.run());
            for (const { input } of this.fields) {
                input.addEventListener("keydown", (e) => e.key === "Enter" && this.run());
            }
            if (PARAMS.has("run")) {
                this.run();
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
            // The fields as a fragment of the command line, those left empty left out.
            const flags = this.fields.map((f) => [f.flag, f.input.value.trim()]).filter(([, value]) => value)
                .map(([flag, value]) => flag + " " + value).join(" ");
            try {
                const start = performance.now();
                const { value } = await this.engine.timed("s7_kv", flags);
                this.say(t("done", { ms: Math.round(performance.now() - start) }));
                this.showCommand(value.flags);
                this.output.textContent = value.output;
                this.state("done");
            } catch (error) {
                this.showCommand([facts().kv_flags.kv.flag]);
                this.failed(error);
            } finally {
                this.button.disabled = false;
            }
        }
    }

    window.attentionPanels.kinds.kv = KvPanel;
})();
