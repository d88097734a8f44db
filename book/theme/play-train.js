// The book's panels, part 4 of 9 (see play-engine.js): stage 5, "Train it here". Each run trains the
// chapter's model in a worker of its own, a few steps per call, and shows the lines of `s5_gpt
// --loss-csv`; the curve is drawn from the numbers the front returns beside them.
(function () {
    "use strict";

    const { PARAMS, t, el, PlayError, Engine, oneThreadLine, Panel, rich, field, textInput, checkbox, outputBox,
        CURVE_COLOURS, lossChart } = window.attentionPanels;
    const SAMPLE_EVERY = 200; // a sample from the model being trained every this many steps
    const SAMPLE_LENGTH = 120;
    // The mask value of the chapter's exercise (the tutorial's is the front's mask_value).
    const EXERCISE_MASK = "0";
    // Stage 7's variants of the model, by clap's id: a field each, after the sequel's flags. A flag
    // that takes a value gets a text field (empty: left out), a switch a checkbox; its caption is
    // the label variant_<id> (else the flag itself), an empty field's placeholder variant_<id>_none.
    const VARIANT_FLAGS = ["kv_heads", "window", "rope", "latent"];

    /** The training flag whose clap id is `id`: {flag: "--layer-norm", default}. */
    function flag(id) {
        return window.attentionPanels.facts.train_flags[id];
    }

    /** The URL parameter of the training flag `id`: the flag without its dashes. */
    function param(id) {
        return PARAMS.get(flag(id).flag.slice(2));
    }

    function hasParam(id) {
        return PARAMS.has(flag(id).flag.slice(2));
    }

    /** The label `key`, or `fallback` where the labels have none. */
    function labelOr(key, fallback, vars) {
        const text = t(key, vars);
        return text === key ? fallback : text;
    }

    /** A field for each of VARIANT_FLAGS that the command line has: {id, input, caption, value()}. */
    function variantFields() {
        return VARIANT_FLAGS.filter((id) => flag(id)).map((id) => {
            const { flag: name, takes_value: takesValue } = flag(id);
            const cls = "play-variant-" + name.slice(2);
            const input = takesValue ? textInput(cls, param(id) || "", { size: 4, inputmode: "numeric",
                placeholder: labelOr("variant_" + id + "_none", flag(id).default || "") })
                : checkbox(cls, hasParam(id));
            const value = () => (takesValue ? input.value.trim() : input.checked);
            return { id, input, takesValue, value, caption: labelOr("variant_" + id, name, { flag: name }) };
        });
    }

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
                this.add(value);
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

        /** One call's steps: their lines of the loss CSV, shown, and their rows' losses, drawn. */
        add({ lines, rows }) {
            if (!lines) {
                return;
            }
            this.lossesPre.append(lines);
            rows.forEach((row) => this.losses.push(row.loss));
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

    class TrainPanel extends Panel {
        constructor(node) {
            super(node);
            this.runs = [];
            this.going = false;
            const initialMask = param("mask_value");
            this.tutorialMask = window.attentionPanels.facts.mask_value;
            this.seed = textInput("play-train-seed", param("seed") || flag("seed").default, { size: 8 });
            this.steps = textInput("play-steps", PARAMS.get("train") || "1000", { size: 8 });
            this.qkv = checkbox("play-qkv", hasParam("qkv"));
            this.heads = textInput("play-heads", param("heads") || "", { size: 4, placeholder: "1" });
            this.residual = checkbox("play-residual", hasParam("residual"));
            this.layerNorm = checkbox("play-layer-norm", hasParam("layer_norm"));
            this.dropout = textInput("play-dropout", param("dropout") || "", { size: 5, placeholder: "0" });
            this.variants = variantFields();
            this.mask = el("select", { class: "play-mask" },
                el("option", { value: this.tutorialMask }, t("mask_tutorial")),
                el("option", { value: EXERCISE_MASK }, t("mask_zero")),
                el("option", { value: "both" }, t("mask_both")));
            if (initialMask !== null && ![this.tutorialMask, EXERCISE_MASK, "both"].includes(initialMask)) {
                this.mask.append(el("option", { value: initialMask }, initialMask));
            }
            this.mask.value = initialMask !== null ? initialMask : this.tutorialMask;
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
            const variants = el("div", { class: "play-controls play-variants" }, ...this.variants.map((v) =>
                field(v.caption, v.input, v.takesValue ? "" : "play-check")));
            const buttons = el("div", { class: "play-controls" }, this.startButton, this.wholeButton,
                this.resetButton);
            node.append(controls, switches, variants, buttons,
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
                this.mask, ...this.variants.map((v) => v.input), this.wholeButton];
        }

        /**
         * The chapter's run: its flags (seed 42, the tutorial's model), every step of its schedule (the
         * trainer's total, two epochs), then the test loss, which the chapter prints after `loss:`.
         */
        async wholeChapter() {
            this.seed.value = flag("seed").default;
            [this.qkv, this.residual, this.layerNorm].forEach((box) => (box.checked = false));
            [this.heads, this.dropout].forEach((input) => (input.value = ""));
            this.variants.forEach((v) => (v.takesValue ? (v.input.value = "") : (v.input.checked = false)));
            this.mask.value = this.tutorialMask;
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

        /** The command-line flags of one run, with the command line's own names (the front's). */
        flags(maskValue) {
            const parts = [flag("seed").flag, this.seed.value.trim()];
            const given = [["qkv", this.qkv.checked], ["heads", this.heads.value.trim()],
                ["residual", this.residual.checked], ["layer_norm", this.layerNorm.checked],
                ["dropout", this.dropout.value.trim()],
                ["mask_value", maskValue !== this.tutorialMask && maskValue],
                ...this.variants.map((v) => [v.id, v.value()])];
            for (const [id, value] of given) {
                if (value) {
                    parts.push(flag(id).flag, ...(value === true ? [] : [value]));
                }
            }
            return parts.join(" ");
        }

        maskValues() {
            return this.mask.value === "both" ? [this.tutorialMask, EXERCISE_MASK] : [this.mask.value];
        }

        settingsChanged() {
            const example = window.attentionPanels.facts.example;
            this.command.textContent = this.maskValues().map((v) =>
                "cargo run --release --example " + example + " -- " + flag("max_steps").flag + " " +
                this.steps.value.trim() + " " + flag("loss_csv").flag + " loss.csv " + this.flags(v)).join("\n");
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

    window.attentionPanels.kinds.train = TrainPanel;
})();
