// The book's panels, part 2 of 9 (see play-engine.js): the pictures, drawn as SVG from the numbers the
// front returns. The heat maps' colours are the book's own (src/plot.rs), from the front's page_facts().
(function () {
    "use strict";

    const { t, svg } = window.attentionPanels;
    const CURVE_COLOURS = ["#2171b5", "#d95f02"];
    const BAR_COLOUR = "#2171b5";

    /** The colour of `fraction` (0 to 1) on the book's "Blues" scale: 0 white, 1 deep blue. */
    function blue(fraction) {
        const blues = window.attentionPanels.facts.blues;
        const x = Math.min(Math.max(fraction, 0), 1) * (blues.length - 1);
        const k = Math.min(Math.floor(x), blues.length - 2);
        const f = x - k;
        const mix = (i) => Math.round(blues[k][i] + (blues[k + 1][i] - blues[k][i]) * f);
        return "rgb(" + mix(0) + "," + mix(1) + "," + mix(2) + ")";
    }

    /**
     * One heat map as SVG: rows are queries, columns keys, labels the tokens. Small maps print each
     * weight in its cell (unless values is false); large ones (a prompt of many characters) only colour
     * it, in cells of at most maxCell pixels. A cell is masked (greyed) above the diagonal if causal, and
     * where mask[i][j] is false.
     */
    function heatMap(title, labels, weights, options) {
        const { causal = false, highlightRow = -1, mask = null, values = true, maxCell = 22 } = options || {};
        const rows = weights.length;
        const cols = rows ? weights[0].length : 0;
        const big = Math.max(rows, cols) > 10;
        const cell = big ? Math.max(12, Math.min(maxCell, Math.floor(420 / Math.max(rows, cols)))) : 46;
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
                // The future, which the causal mask hides, and what a mask given hides.
                const masked = (causal && j > i) || Boolean(mask && !mask[i][j]);
                const rect = svg("rect", { x: x, y: y, width: cell, height: cell,
                    fill: masked ? window.attentionPanels.facts.masked : blue(fraction), stroke: "white" });
                rect.append(svg("title", {}, label(i) + " → " + label(j) + ": " + formatWeight(w)));
                map.append(rect);
                if (!big && !masked && values) {
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

    /**
     * Horizontal bars, one per row of the front's distribution: the character as the command prints it
     * ('e', '\n', ' '), a bar as long as its probability and the probability as printed. The scale ends at the first of 0.01,
     * 0.02, 0.05, 0.1, … 1 that holds the longest bar, and its ticks are drawn on top.
     */
    function probsChart(rows) {
        const left = 52;
        const barWidth = 420;
        const row = 18;
        const top = 24;
        const width = left + barWidth + 96;
        const height = top + rows.length * row + 6;
        const largest = Math.max(0, ...rows.map((r) => r.p));
        const end = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1].find((m) => m >= largest) || 1;
        const x = (p) => left + (p / end) * barWidth;
        const chart = svg("svg", { class: "play-probs-bars", viewBox: "0 0 " + width + " " + height,
            width: width, height: height, role: "img", "aria-label": t("probs_chart") });
        chart.append(svg("rect", { x: 0, y: 0, width: width, height: height, fill: "white" }));
        for (const tick of [0, end / 2, end]) {
            chart.append(svg("line", { x1: x(tick), x2: x(tick), y1: top - 4, y2: height - 4, class: "play-grid" }));
            chart.append(svg("text", { x: x(tick), y: top - 8, "text-anchor": "middle", class: "play-tick" },
                String(+tick.toFixed(3))));
        }
        rows.forEach(({ label, p, printed }, i) => {
            const y = top + i * row;
            const tip = Math.max(x(p), left + 0.5);
            chart.append(svg("text", { x: left - 8, y: y + 13, "text-anchor": "end", class: "play-probs-label" },
                label));
            const bar = svg("rect", { x: left, y: y + 2, width: tip - left, height: row - 4, fill: BAR_COLOUR });
            bar.append(svg("title", {}, label + ": " + printed));
            chart.append(bar);
            chart.append(svg("text", { x: tip + 6, y: y + 13, class: "play-tick" }, printed));
        });
        return chart;
    }

    Object.assign(window.attentionPanels, { CURVE_COLOURS, heatMap, lossChart, probsChart });
})();
