// The book's panels, part 9 of 9 (see play-engine.js): stage 8, "Watch the heads form". It trains the
// study's two-block attention-only model (`s8_heads --phase --model aon2`) in a worker, a few steps per
// call, probes it every PROBE_EVERY steps and shows the probe's line of the record, the grid of its
// heads' scores and the loss curve; a text of the reader's is drawn head by head, and a click on a head
// of the grid zeroes it and shows the loss on the repeated half. Every number comes from the front.
// URL parameters: s8_heads.html?heads-train=200&pattern=TEXT&ablate=b1h2
//   heads-train=N  trains N steps on load, then stops; pattern= draws that text; ablate= zeroes that head
(function () {
    "use strict";

    const { PARAMS, t, el, svg, Engine, Panel, rich, field, textInput, outputBox, messageFor, heatMap, lossChart,
        CURVE_COLOURS } = window.attentionPanels;
    const PROBE_EVERY = 100; // as the chapter's record: `--every 100`
    const DEFAULT_TEXT = "ROMEO: my love is deep; ROMEO: my love is deep";
    const KINDS = ["previous", "duplicate", "induction"]; // a probe's three scores per head, in order
    const MAX_CELL = 10;

    /** The colour of a score from 0 (white) to 1 (deep blue), as the book's heat maps. */
    function shade(score) {
        const blues = window.attentionPanels.facts.blues;
        const x = Math.min(Math.max(score, 0), 1) * (blues.length - 1);
        const [r, g, b] = blues[Math.round(x)];
        return "rgb(" + r + "," + g + "," + b + ")";
    }

    /**
     * The phase change as it happens: at each probe, the highest previous-token score of block 0 and
     * the highest induction score of the last block, on a 0-to-1 scale over the steps trained so far.
     */
    function scoresChart(probes, total) {
        const [width, height, left, right, top, bottom] = [640, 200, 40, 12, 24, 30];
        const last = probes[probes.length - 1].step;
        const steps = Math.max(PROBE_EVERY, Math.min(total, last));
        const x = (step) => left + ((width - left - right) * step) / steps;
        const y = (score) => top + (height - top - bottom) * (1 - score);
        const chart = svg("svg", { class: "play-heads-scores-chart", viewBox: "0 0 " + width + " " + height,
            role: "img", "aria-label": t("heads_scores") });
        chart.append(svg("rect", { x: 0, y: 0, width, height, fill: "white" }),
            svg("text", { x: left, y: 15, class: "play-chart-title" }, t("heads_scores")));
        for (const score of [0, 0.5, 1]) {
            chart.append(svg("line", { x1: left, x2: width - right, y1: y(score), y2: y(score), class: "play-grid" }),
                svg("text", { x: left - 6, y: y(score) + 4, "text-anchor": "end", class: "play-tick" }, String(score)));
        }
        chart.append(svg("text", { x: (left + width - right) / 2, y: height - 4, "text-anchor": "middle",
            class: "play-tick" }, t("loss_axis_step") + " (" + last + ")"));
        const best = (scores, kind) => Math.max(...scores.map((s) => s[kind]));
        const curves = [["heads_best_previous", (p) => best(p.heads[0], 0)],
            ["heads_best_induction", (p) => best(p.heads[p.heads.length - 1], 2)]];
        curves.forEach(([label, score], k) => {
            const points = probes.map((p) => x(p.step).toFixed(1) + "," + y(score(p)).toFixed(1)).join(" ");
            chart.append(svg("polyline", { points, fill: "none", stroke: CURVE_COLOURS[k], "stroke-width": 1.5,
                "data-points": probes.length }),
            svg("line", { x1: left + 12, x2: left + 32, y1: top + 10 + 16 * k, y2: top + 10 + 16 * k,
                stroke: CURVE_COLOURS[k], "stroke-width": 2.5 }),
            svg("text", { x: left + 38, y: top + 14 + 16 * k, class: "play-tick" }, t(label)));
        });
        return chart;
    }

    class HeadsPanel extends Panel {
        constructor(node) {
            super(node);
            this.engine = null;
            this.steps = 0;
            this.losses = [];
            this.going = false;
            this.last = null; // the last probe
            this.probes = []; // every probe so far: the scores chart's points
            this.button = el("button", { type: "button", class: "play-run play-heads-train" }, t("heads_train"));
            this.stepsLine = el("span", { class: "play-heads-steps" });
            this.grid = el("div", { class: "play-heads-grid" });
            this.ablation = el("p", { class: "play-heads-ablation" });
            this.chart = el("div", { class: "play-heads-chart" });
            this.scores = el("div", { class: "play-heads-scores" });
            this.record = el("pre", { class: "play-probes" });
            this.text = textInput("play-heads-text", PARAMS.get("pattern") || DEFAULT_TEXT, { size: 46 });
            this.show = el("button", { type: "button", class: "play-heads-show" }, t("heads_show"));
            this.maps = el("div", { class: "play-heads-maps" });
            node.append(el("div", { class: "play-controls" }, this.button, this.stepsLine), this.message,
                this.grid, this.ablation, this.scores, this.chart,
                outputBox(t("heads_record", { stage: "s8_heads" }), this.record),
                el("div", { class: "play-controls" }, field(t("heads_text"), this.text), this.show), this.maps);
            this.button.addEventListener("click", () => (this.going ? this.pause() : this.go()));
            this.show.addEventListener("click", () => this.pattern());
            this.text.addEventListener("keydown", (e) => e.key === "Enter" && this.pattern());
            this.drawGrid();
            const wanted = Number(PARAMS.get("heads-train"));
            if (Number.isInteger(wanted) && wanted > 0) {
                this.go(wanted).then(() => this.afterLoad());
            }
        }

        /** The URL's pattern and ablation, once the asked-for steps are trained; then data-loaded is set. */
        async afterLoad() {
            if (PARAMS.has("pattern")) {
                await this.pattern();
            }
            const head = /^b(\d+)h(\d+)$/.exec(PARAMS.get("ablate") || "");
            if (PARAMS.has("ablate") && head) {
                await this.ablate(Number(head[1]), Number(head[2]));
            } else if (PARAMS.has("ablate")) {
                this.ablation.textContent = t("heads_bad_head", { head: PARAMS.get("ablate") });
                this.ablation.classList.add("play-error");
            }
            this.node.dataset.loaded = "";
        }

        /** The model, started once: its worker, and its first probe (step 0). */
        async open() {
            if (this.engine) {
                return;
            }
            this.engine = new Engine();
            const { total } = await this.engine.call("heads_new", 0);
            this.total = total;
            await this.probe();
        }

        /** Trains until `target` steps (the study's last if none), probing every PROBE_EVERY. */
        async go(target) {
            this.going = true;
            this.button.textContent = t("heads_pause");
            this.state("running");
            this.say(t("running"));
            try {
                await this.open();
                const stop = target || this.total;
                let [chunk, computeMs, trained] = [5, 0, 0];
                while (this.going && this.steps < stop) {
                    const toProbe = PROBE_EVERY - (this.steps % PROBE_EVERY);
                    const n = Math.max(1, Math.min(chunk, toProbe, stop - this.steps));
                    const { value, ms } = await this.engine.timed("heads_run", n);
                    [computeMs, trained] = [computeMs + ms, trained + value.rows.length];
                    chunk = Math.max(1, Math.min(200, Math.round(n * (250 / Math.max(ms, 1)))));
                    value.rows.forEach((row) => this.losses.push(row.loss));
                    this.steps = value.steps;
                    if (this.steps % PROBE_EVERY === 0 || this.steps === stop) {
                        await this.probe();
                    }
                    const rate = computeMs > 0 ? Math.round(trained / (computeMs / 1000)) : 0;
                    this.stepsLine.textContent = t("heads_steps", { steps: this.steps, total: this.total, rate });
                }
                this.say(this.steps >= this.total ? t("heads_done", { steps: this.steps }) : t("heads_paused", { steps: this.steps }));
                this.state(this.steps >= this.total ? "done" : "paused");
            } catch (error) {
                this.failed(error);
            } finally {
                this.going = false;
                this.button.textContent = t(this.steps ? "heads_go_on" : "heads_train");
            }
        }

        pause() {
            this.going = false;
        }

        /** A probe now: its line in the record, its scores in the grid, the curve redrawn. */
        async probe() {
            const p = await this.engine.call("heads_probe");
            this.last = p;
            this.probes.push(p);
            this.record.append(p.line + "\n");
            this.drawGrid();
            this.scores.replaceChildren(scoresChart(this.probes, this.total));
            this.chart.replaceChildren(lossChart([{ losses: this.losses, colour: CURVE_COLOURS[0], label: "" }]));
        }

        /** Each head a cell: its previous-token and induction scores, shaded by the induction score. */
        drawGrid() {
            const blocks = this.last ? this.last.heads : [[null, null, null, null], [null, null, null, null]];
            const rows = blocks.map((heads, b) => el("div", { class: "play-heads-row" },
                el("span", { class: "play-caption" }, t("heads_block", { block: b })),
                ...heads.map((scores, h) => {
                    const cell = el("button", { type: "button", class: "play-heads-cell", "data-head": "b" + b + "h" + h,
                        title: t("heads_click") });
                    const text = scores ? KINDS.map((k, i) => t("heads_" + k) + " " + scores[i].toFixed(2)) : ["–"];
                    cell.append(el("strong", {}, "b" + b + "h" + h), ...text.map((line) => el("span", {}, line)));
                    if (scores) {
                        cell.style.background = shade(scores[2]);
                        cell.style.color = scores[2] > 0.55 ? "white" : "black";
                        cell.dataset.induction = scores[2].toFixed(3);
                    }
                    cell.addEventListener("click", () => this.ablate(b, h));
                    return cell;
                })));
            this.grid.replaceChildren(el("div", { class: "play-caption" }, ...rich(t("heads_grid"))), ...rows);
        }

        /** Head h of block b zeroed: the loss on the probes' second copies, against the model's own. */
        async ablate(b, h) {
            try {
                await this.open();
                const { value } = await this.engine.timed("heads_ablate", b, h);
                this.ablation.replaceChildren(...rich(t("heads_ablated", { head: value.head, steps: this.steps,
                    kept: value.kept.toFixed(4), ablated: value.ablated.toFixed(4) })));
                this.ablation.classList.remove("play-error");
            } catch (error) {
                this.ablation.textContent = messageFor(error);
                this.ablation.classList.add("play-error");
            }
        }

        /** Every head's weights on the reader's text, the induction stripe where a phrase repeats. */
        async pattern() {
            try {
                await this.open();
                const { labels, maps } = await this.engine.call("heads_pattern", this.text.value);
                this.maps.replaceChildren(...maps.map((heads, b) => el("div", { class: "play-heatmaps" },
                    ...heads.map((weights, h) => heatMap("b" + b + "h" + h, labels, weights,
                        { causal: true, values: false, maxCell: MAX_CELL })))));
                this.maps.classList.remove("play-error");
            } catch (error) {
                this.maps.replaceChildren(el("p", { class: "play-message play-error" }, messageFor(error)));
            }
        }
    }

    window.attentionPanels.kinds.heads = HeadsPanel;
})();
