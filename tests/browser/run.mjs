// The book's panels in a real browser, against `cargo run`, byte for byte.
//
// Usage (from the crate root, after `bash book/build.sh`):
//   node tests/browser/run.mjs            the checks (.ci/run runs this)
//   node tests/browser/run.mjs --speed 5  only the training speed: 5 runs of 1,000 steps per path
//                                         (the page's own choice, &kernel=f64, &threads=1 and both),
//                                         their medians
//   node tests/browser/run.mjs --only stages train   some groups of checks (see main)
//
// It serves book/book/ from a loopback port, opens the pages in headless Chromium (Debian's, at
// /usr/bin/chromium, or $CHROMIUM), and compares what each panel writes with what the examples print
// when run here and now (nothing expected is written into this file). Every request the browser makes
// is recorded, and one beyond the loopback server fails the test.
//
// Checks, in both editions unless said:
// - stages 1-4: `sN.html?seed=K&run` writes into <pre class="play-output"> what
//   `cargo run --example sN -- --seed K` prints, for the book's seeds and for 7, 2024 and -3;
// - stage 5: `s5_gpt.html?train=100` writes into <pre class="play-losses"> the file that
//   `s5_gpt --max-steps 100 --loss-csv F` writes, for the tutorial's model and for sequel models
//   (English edition; one run in the Chinese one), the tutorial's model and one sequel model on each
//   path the page can be made to take (its own choice, fused lanes where the browser has relaxed SIMD
//   on every core where the page is cross-origin isolated; `&kernel=f64`; `&threads=1`; both), each
//   reporting the kernel and the threads it took, several where it may; `&test` adds the test loss,
//   which is the `loss:` line of `s5_gpt --max-steps 100`; "Train the whole chapter" starts the
//   chapter's run (its flags, all of its steps); 300 steps once, past the panel's first sample,
//   which is the chapter's sample after 200 steps; Start, Pause and Go on by hand change nothing, and
//   the mask values -1e9 and 0 side by side are the two native runs; where service workers are
//   blocked (so the page is not isolated), one thread, the panel saying why in one line;
// - stage 6: `s6_flash.html?scores=…&context=T&tile=N&run` writes into <pre class="play-output"> what
//   `cargo run --example s6_flash -- --scores … --context T --tile N` prints, for the chapter's input (no
//   flags) and for edited scores with a reader's T and tile (T = 1000 in tiles of 48, and T = 4096); the
//   walk shows each step's cell as printed, Next step by Next step; the memory and difference lines carry
//   the printed numbers; bad scores, T and tiles show the command line's one-line message;
// - stage 7: `s7_variants.html?layers=N&kv-heads=K&…&run` writes into <pre class="play-output"> what
//   `cargo run --example s7_variants -- --kv --layers N --kv-heads K …` prints, for the defaults, all 32
//   K/V heads, the DeepSeek-sized latent example and a window of 4,096, and its caption names that
//   command; bad sizes (K/V heads that do not divide the heads, 0, not a number) show its one-line message;
// - stage 7: `s7_variants.html?weights=P&variant=V` writes into the variants panel's <pre class="play-output">
//   what `cargo run --example s7_variants -- --weights P --variant V` prints, for the chapter's prompt and
//   every variant, and for a prompt of the reader's with one variant, draws a mask and a map per head
//   for each variant, and greys the keys the window hides; a character outside the model's line, a prompt
//   over its context and an unknown variant show the command line's one-line message;
// - stage 8: `s8_heads.html?heads-train=200&pattern=…&ablate=b1h2` writes into <pre class="play-probes"> the lines
//   that `cargo run --example s8_heads -- --phase --model aon2 --steps 200 --every 100` prints, shades the eight
//   heads, draws the best scores at each probe, draws each head's map of the text and zeroes the head; a
//   character outside the corpus, a text over the context and a head the model lacks show one line each; the
//   steps per second are printed;
// - stage 5 with stage 7's variants: `s5_gpt.html?train=100&kv-heads=K&window=W&rope&latent=L…` writes the file
//   that `s5_gpt --max-steps 100 --loss-csv F --kv-heads K --window W --rope …` writes, in both editions,
//   its command line naming the flags; K/V heads that do not divide the heads and a window of 0 show the
//   command line's one-line message;
// - a reader's checkpoint with stage 7's variants (`s5_gpt train --save DIR --kv-heads 2 --window 4 --rope
//   …`), chosen in the sample panel: its `--probs` and its sample are what `generate --checkpoint DIR`
//   prints, and its maps grey the keys the window hides;
// - generation from the book's checkpoint equals `s5_gpt generate --checkpoint` with the same flags, also
//   with `--no-cache` (the same text);
// - `s5_gpt.html?probs=P&temperature=T&top-k=K` writes into <pre class="play-probs"> what
//   `s5_gpt generate --checkpoint C --prompt P … --probs` prints, for prompts with a space and a line
//   break, one longer than the context, temperatures 0.5, 1 and 2 and top-k 5 (at most five lines,
//   and ties), and draws the likeliest as bars; editing the prompt redraws them; a prompt character
//   outside the vocabulary and a temperature of 0 show the command line's one-line message;
// - bad input (a seed out of range, heads that do not divide the width, a prompt character outside
//   the vocabulary) shows the command line's one-line message in the panel;
// - the labels are complete in both languages, and each edition shows its own;
// - fma_self_check() finds no mismatch, on each path; built without the WebAssembly, or opened from file://, a
//   panel says in one line what to do;
// - the training speed at the tutorial's size is printed, with the kernel (not asserted: the machine is
//   shared).
import { spawnSync } from "node:child_process";
import { createReadStream, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
// PLAY_BOOK_DIR: another build of the book to test (default book/book).
const BOOK = process.env.PLAY_BOOK_DIR ? resolve(process.env.PLAY_BOOK_DIR) : join(ROOT, "book", "book");
const CHECKPOINT = join(BOOK, "play", "data", "checkpoint");
const CORPUS = join(BOOK, "play", "data", "tinyshakespeare.txt");
const STAGES = ["s1_simple", "s2_trainable", "s3_causal", "s4_multihead"];
const SEEDS = ["", "7", "2024", "-3"]; // "" is the book's seeds
const EDITIONS = ["", "zh-CN/"];
const TIMEOUT = 10 * 60 * 1000;

let failures = 0;
let checks = 0;
function check(ok, what, detail) {
    checks++;
    if (ok) {
        console.log("  ok    " + what);
    } else {
        failures++;
        console.log("  FAIL  " + what + (detail ? "\n" + indent(detail) : ""));
    }
}
function indent(text) {
    return String(text).split("\n").map((l) => "        " + l).join("\n");
}

/** Where two texts first differ, for a failure's message. */
function firstDifference(got, want) {
    let i = 0;
    while (i < got.length && i < want.length && got[i] === want[i]) {
        i++;
    }
    const line = want.slice(0, i).split("\n").length;
    return `first difference at character ${i} (line ${line}): page ${JSON.stringify(got.slice(i, i + 60))}` +
        ` vs native ${JSON.stringify(want.slice(i, i + 60))} (lengths ${got.length} and ${want.length})`;
}

// ---------------------------------------------------------------------------------------------------
// Native runs: the examples as `cargo test` builds them (the test profile, optimised as release is, with
// overflow checks on; the bits are the same), so that CI, which runs the tests first, builds them once.

function cargo(args, allowFailure) {
    const run = spawnSync("cargo", ["run", "--profile", "test", "--quiet", ...args], {
        cwd: ROOT, encoding: "utf8", maxBuffer: 64 << 20,
    });
    if (run.error) {
        throw run.error;
    }
    if (run.status !== 0 && !allowFailure) {
        throw new Error(`cargo ${args.join(" ")} failed (${run.status}):\n${run.stderr}`);
    }
    return run;
}

function nativeStage(stage, seed) {
    return cargo(["--example", stage, ...(seed ? ["--", "--seed", seed] : [])]).stdout;
}

/** The file `s5_gpt --max-steps N --loss-csv F` writes, with these extra flags. */
function nativeLosses(steps, flags) {
    const dir = mkdtempSync(join(tmpdir(), "play-losses-"));
    const file = join(dir, "loss.csv");
    try {
        cargo(["--example", "s5_gpt", "--", "--max-steps", String(steps), "--loss-csv", file, "--data", CORPUS,
            "--no-download", "--quiet", "--log-every", "0", "--sample-len", "1", ...flags]);
        return readFileSync(file, "utf8");
    } finally {
        rmSync(dir, { recursive: true, force: true });
    }
}

/** What `s5_gpt --max-steps N` prints after `loss: `: the test loss after N steps. */
function nativeTestLoss(steps, flags) {
    const out = cargo(["--example", "s5_gpt", "--", "--max-steps", String(steps), "--data", CORPUS, "--no-download",
        "--quiet", "--log-every", "0", "--sample-len", "1", ...flags]).stdout;
    return out.match(/^loss: (.*)$/m)[1];
}

/** The first line of what a failing command prints on stderr, without its "error: ". */
function nativeError(args) {
    const run = cargo(args, true);
    if (run.status === 0) {
        throw new Error(`expected cargo ${args.join(" ")} to fail`);
    }
    return run.stderr.split("\n").find((l) => l.trim()).replace(/^error: /, "");
}

// ---------------------------------------------------------------------------------------------------
// The loopback server.

const TYPES = {
    ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".mjs": "text/javascript",
    ".css": "text/css", ".wasm": "application/wasm", ".json": "application/json", ".svg": "image/svg+xml",
    ".png": "image/png", ".woff2": "font/woff2", ".woff": "font/woff", ".ttf": "font/ttf",
    ".txt": "text/plain; charset=utf-8", ".ico": "image/x-icon",
};

function serve(root) {
    const served = [];
    const server = createServer((req, res) => {
        let path = decodeURIComponent(new URL(req.url, "http://x").pathname);
        served.push(path);
        // /no-wasm/… is the book as built without a WebAssembly toolchain: no play/pkg/.
        if (path.startsWith("/no-wasm/")) {
            path = path.slice("/no-wasm".length);
            if (path.includes("/play/pkg/")) {
                res.writeHead(404).end("not found");
                return;
            }
        }
        let file = normalize(join(root, path));
        if (!file.startsWith(root)) {
            res.writeHead(403).end();
            return;
        }
        if (existsSync(file) && statSync(file).isDirectory()) {
            file = join(file, "index.html");
        }
        if (!existsSync(file)) {
            res.writeHead(404).end("not found");
            return;
        }
        res.writeHead(200, { "Content-Type": TYPES[extname(file)] || "application/octet-stream" });
        createReadStream(file).pipe(res);
    });
    return new Promise((done) => server.listen(0, "127.0.0.1", () => done({ server, served })));
}

// ---------------------------------------------------------------------------------------------------
// The browser.

async function openBrowser(origin) {
    const browser = await chromium.launch({
        executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
        args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            // Any name but the loopback address resolves to nothing, so a stray request fails.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
    });
    const context = await browser.newContext();
    const requests = [];
    context.on("request", (request) => requests.push(request.url()));
    const { isolated, cores } = await installServiceWorker(context, origin);
    return { browser, context, requests, origin, isolated, cores };
}

/** Lets the book's service worker (book/src/coi-sw.js) install and the first page reload once under it,
 * so that no check's page is reloaded halfway; later pages of `context` start cross-origin isolated.
 * Resolves to {isolated, cores}: whether they are, and the cores the browser reports. */
async function installServiceWorker(context, origin) {
    const page = await context.newPage();
    await page.goto(origin + "/index.html");
    // The reload destroys the page's context once, mid-wait: then wait again on the reloaded page.
    for (let attempt = 1; ; attempt++) {
        try {
            await page.waitForFunction(() => window.attentionIsolation, null, { timeout: TIMEOUT });
            const state = await page.evaluate(() => window.attentionIsolation.ready
                .then(({ isolated, reason }) => ({ isolated, reason, cores: navigator.hardwareConcurrency })));
            console.log(`pages cross-origin isolated: ${state.isolated ? "yes" : "no (" + state.reason + ")"}; ` +
                `${state.cores} cores`);
            await page.close();
            return state;
        } catch (error) {
            if (attempt === 3) {
                throw error;
            }
            await page.waitForLoadState("load");
        }
    }
}

/** Opens a page and waits until the panel matched by `selector` has finished (done, error, …). */
async function openPanel(b, path, selector) {
    const page = await b.context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    // What is checked is the panel's end state, below; the page's load event (every image and font of
    // the page) is not waited for, so that a slow subresource on a busy machine fails nothing.
    await page.goto(b.origin + path, { waitUntil: "domcontentloaded", timeout: TIMEOUT });
    await page.waitForSelector(`${selector}[data-state="done"], ${selector}[data-state="error"], ` +
        `${selector}[data-state="unavailable"], ${selector}[data-state="paused"]`, { timeout: TIMEOUT });
    const state = await page.getAttribute(selector, "data-state");
    const message = await page.textContent(`${selector} .play-message`);
    return { page, state, message, errors };
}

async function stageChecks(b) {
    console.log("stages 1-4: the panel prints what the example prints");
    const natives = {};
    for (const stage of STAGES) {
        natives[stage] = {};
        for (const seed of SEEDS) {
            natives[stage][seed] = nativeStage(stage, seed);
        }
    }
    for (const edition of EDITIONS) {
        for (const stage of STAGES) {
            for (const seed of SEEDS) {
                const query = seed ? `?seed=${encodeURIComponent(seed)}&run` : "?run";
                const { page, state, message, errors } = await openPanel(b, `/${edition}${stage}.html${query}`,
                    ".play-panel[data-play=stage]");
                const got = await page.textContent("pre.play-output");
                const want = natives[stage][seed];
                check(state === "done" && got === want && errors.length === 0,
                    `${edition || "en/"}${stage} seed ${seed || "(the book's)"}: ${want.length} bytes equal`,
                    state !== "done" ? `state ${state}: ${message} ${errors.join(" ")}` :
                        got !== want ? firstDifference(got, want) : errors.join("\n"));
                const maps = await page.locator(".play-heatmaps svg").count();
                if (!seed && stage !== "s2_trainable") { // the book draws no heat map of stage 2
                    check(maps > 0, `${edition || "en/"}${stage}: ${maps} heat map(s) drawn`);
                }
                await page.close();
            }
        }
    }
}

/** The panel's parameters for s6_flash's flags (`--scores 1,2 --context 100` is `scores=1,2&context=100`). */
function flashParams(flags) {
    const params = [];
    for (let i = 0; i < flags.length; i += 2) {
        params.push(`${flags[i].slice(2)}=${encodeURIComponent(flags[i + 1])}`);
    }
    return params.concat("run").join("&");
}

async function flashChecks(b) {
    console.log("stage 6: the panel prints what s6_flash prints for the same flags, and walks its steps");
    const runs = [
        [],
        ["--scores", "0.9,1.5,-0.3,2,1"],
        ["--scores", "0.9,1.5,-0.3,2,1", "--context", "1000", "--tile", "48"],
        ["--scores", "-1.25, 3,0.5", "--context", "4096", "--tile", "64"],
    ];
    const panel = ".play-panel[data-play=flash]";
    for (const flags of runs) {
        const want = cargo(["--example", "s6_flash", ...(flags.length ? ["--", ...flags] : [])]).stdout;
        for (const edition of EDITIONS) {
            const what = `${edition || "en/"}s6_flash ${flags.join(" ") || "(no flags)"}`;
            const { page, state, message, errors } = await openPanel(b, `/${edition}s6_flash.html?${flashParams(flags)}`,
                panel);
            const got = await page.textContent("pre.play-output");
            check(state === "done" && got === want && errors.length === 0, `${what}: ${want.length} bytes equal`,
                state !== "done" ? `state ${state}: ${message} ${errors.join(" ")}` :
                    got !== want ? firstDifference(got, want) : errors.join("\n"));
            if (state === "done") {
                await walkCheck(page, want, what);
                await summaryCheck(page, want, flags, what);
            }
            await page.close();
        }
    }
    await flashBadInputChecks(b);
}

/** Next step by Next step, the walk box shows each `[step n]` cell of the printed output. */
async function walkCheck(page, want, what) {
    const printed = want.split("\n\n").filter((cell) => /^\[step \d+\]/.test(cell));
    const shown = [await page.textContent("pre.play-flash-step")];
    while (!(await page.isDisabled(".play-flash-next"))) {
        await page.click(".play-flash-next");
        shown.push(await page.textContent("pre.play-flash-step"));
    }
    check(printed.length > 0 && JSON.stringify(shown) === JSON.stringify(printed),
        `${what}: the walk shows its ${printed.length} steps one by one, each as printed`,
        `shown ${JSON.stringify(shown)}\nprinted ${JSON.stringify(printed)}`);
}

/** The memory line carries the printed bytes (when --context or --tile is given), the difference line the
 * printed largest difference, and the time line a time. */
async function summaryCheck(page, want, flags, what) {
    const memory = await page.textContent(".play-flash-memory");
    const difference = await page.textContent(".play-flash-difference");
    const time = await page.textContent(".play-flash-time");
    const printedBytes = [...want.matchAll(/floats, (\d+) bytes/g)].map((m) => m[1]);
    const sized = flags.includes("--context") || flags.includes("--tile");
    const line = want.match(/^tiled vs stage 4: .*$/gm).pop();
    const [, absolute, tiled] = line.match(/, (\S+) absolutely, ([\d.]+) ULPs of the largest output$/);
    check((sized ? printedBytes.length === 2 : printedBytes.length === 0) &&
        printedBytes.every((n) => memory.includes(n + " ")) && difference.includes(" " + tiled + " ") &&
        difference.includes(absolute) &&
        /\d+\.\d ms|\d+\.\d 毫秒/.test(time),
        `${what}: memory "${memory}"; difference "${difference}"; time "${time}"`,
        `printed bytes ${printedBytes.join(", ")}, printed tiled difference ${tiled} ULPs, ${absolute}`);
}

async function flashBadInputChecks(b) {
    const cases = [
        ["--scores", "1,x"],
        ["--scores", "0.5,inf"],
        ["--scores", ","],
        ["--context", "0"],
        ["--context", "5000"],
        ["--context", "100", "--tile", "101"],
        ["--tile", "0"],
        ["--context", "abc"],
    ];
    for (const [i, flags] of cases.entries()) {
        const edition = EDITIONS[i % EDITIONS.length];
        const { page, state, message, errors } = await openPanel(b, `/${edition}s6_flash.html?${flashParams(flags)}`,
            ".play-panel[data-play=flash]");
        const line = (message || "").trim();
        const want = nativeError(["--example", "s6_flash", "--", ...flags]);
        const output = await page.textContent("pre.play-output");
        check(state === "error" && (line === want || line === "error: " + want) && output === "" &&
            errors.length === 0, `${edition || "en/"}s6_flash ${flags.join(" ")}: "${line}"`,
            `state ${state}; native "${want}"; ${errors.join(" ")}`);
        await page.close();
    }
}

/** The calculator's runs: `s7_variants --kv` and these flags, in the order of its help (the panel's). */
const KV_RUNS = [
    [],
    ["--kv-heads", "32"],
    ["--layers", "48", "--heads", "24", "--kv-heads", "24", "--tokens", "8192", "--latent", "1024"],
    ["--window", "4096"],
];

async function kvChecks(b) {
    console.log("stage 7: the KV-memory calculator prints what s7_variants --kv prints for the same flags");
    const panel = ".play-panel[data-play=kv]";
    for (const flags of KV_RUNS) {
        const want = cargo(["--example", "s7_variants", "--", "--kv", ...flags]).stdout;
        for (const edition of EDITIONS) {
            const what = `${edition || "en/"}s7_variants --kv ${flags.join(" ")}`.trim();
            const { page, state, message, errors } = await openPanel(b,
                `/${edition}s7_variants.html?${flashParams(flags)}`, panel);
            const got = await page.textContent(`${panel} pre.play-output`);
            const caption = await page.textContent(`${panel} .play-output-caption`);
            const command = `cargo run --example s7_variants -- ${["--kv", ...flags].join(" ")}`;
            check(state === "done" && got === want && caption.includes(command) && errors.length === 0,
                `${what}: ${want.length} bytes equal, under "${caption}"`,
                state !== "done" ? `state ${state}: ${message} ${errors.join(" ")}` :
                    got !== want ? firstDifference(got, want) : `caption lacks "${command}"; ${errors.join("\n")}`);
            await page.close();
        }
    }
    const bad = [
        ["--kv-heads", "3"],
        ["--layers", "0"],
        ["--heads", "24", "--kv-heads", "32"],
        ["--tokens", "many"],
        ["--layers", "10000000", "--kv-heads", "32", "--head-dim", "10000000", "--tokens", "10000000"],
    ];
    for (const [i, flags] of bad.entries()) {
        for (const edition of i ? [EDITIONS[i % EDITIONS.length]] : EDITIONS) {
            const { page, state, message, errors } = await openPanel(b,
                `/${edition}s7_variants.html?${flashParams(flags)}`, panel);
            const line = (message || "").trim();
            const want = nativeError(["--example", "s7_variants", "--", "--kv", ...flags]);
            const output = await page.textContent(`${panel} pre.play-output`);
            check(state === "error" && (line === want || line === "error: " + want) && output === "" &&
                errors.length === 0, `${edition || "en/"}s7_variants --kv ${flags.join(" ")}: "${line}"`,
                `state ${state}; native "${want}"; ${errors.join(" ")}`);
            await page.close();
        }
    }
}

/** The first blocks' runs: `s7_variants --weights PROMPT` and these flags. */
const WEIGHTS_RUNS = [
    { prompt: "O Romeo, Romeo!", variant: "" },
    { prompt: "wherefore art thou Romeo? Deny", variant: "swa" },
    { prompt: "Deny thy father", variant: "rope" },
];

async function variantsChecks(b) {
    console.log("stage 7: each variant's first block, as s7_variants --weights prints it for the same prompt");
    const panel = ".play-panel[data-play=variants]";
    const variants = cargo(["--example", "s7_variants", "--", "--weights", "O", "--variant", "?"], true).stderr
        .match(/use one of (.*)$/m)[1].split(", ");
    for (const [k, { prompt, variant }] of WEIGHTS_RUNS.entries()) {
        const flags = ["--weights", prompt, ...(variant ? ["--variant", variant] : [])];
        const want = cargo(["--example", "s7_variants", "--", ...flags]).stdout;
        for (const edition of k ? [EDITIONS[k % EDITIONS.length]] : EDITIONS) {
            const query = `weights=${encodeURIComponent(prompt)}${variant ? "&variant=" + variant : ""}`;
            const { page, state, message, errors } = await openPanel(b, `/${edition}s7_variants.html?${query}`, panel);
            const got = await page.textContent(`${panel} pre.play-output`);
            const caption = await page.textContent(`${panel} .play-output-box .play-output-caption`);
            // Each variant's pictures: its mask and a map per head, the cells its mask hides greyed in each.
            const shown = await page.$$eval(`${panel} .play-variant`, (nodes) => nodes.map((n) => {
                const rects = [...n.querySelectorAll("svg rect")];
                const greyed = rects.filter((r) => r.getAttribute("fill") === window.attentionPanels.facts.masked);
                return [n.dataset.variant, n.querySelectorAll("svg").length, greyed.length];
            }));
            const wantShown = want.split("\n## ").slice(1).map((part) => {
                const short = part.match(/\(--variant (\w+)\)/)[1];
                const maps = 1 + (part.match(/^head \d+:/gm) || []).length;
                const hidden = (part.slice(part.indexOf("mask:"), part.indexOf("head 1:")).match(/·/g) || []).length;
                return [short, maps, maps * hidden];
            });
            check(state === "done" && got === want && errors.length === 0 &&
                JSON.stringify(shown) === JSON.stringify(wantShown) && caption.includes("s7_variants -- --weights"),
                `${edition || "en/"}s7_variants?${query}: ${want.length} bytes equal; maps and greyed cells ` +
                `per variant ${shown.map(([v, n, g]) => `${v} ${n}/${g}`).join(", ")}`,
                state !== "done" ? `state ${state}: ${message} ${errors.join(" ")}` :
                    got !== want ? firstDifference(got, want) :
                        `shown ${JSON.stringify(shown)}, want ${JSON.stringify(wantShown)}; ` +
                        `caption "${caption}"; ${errors.join(" ")}`);
            await page.close();
        }
    }
    check(variants.length >= 5, `the variants the command line names: ${variants.join(", ")}`);
    const bad = [
        { prompt: "Juliet", variant: "" },
        { prompt: "Romeo, Romeo! wherefore art thou Romeo", variant: "" },
        { prompt: "Romeo", variant: "mla?" },
        { prompt: "", variant: "" },
    ];
    for (const [i, { prompt, variant }] of bad.entries()) {
        for (const edition of i ? [EDITIONS[i % EDITIONS.length]] : EDITIONS) {
            const query = `weights=${encodeURIComponent(prompt)}${variant ? "&variant=" + variant : ""}`;
            const { page, state, message, errors } = await openPanel(b, `/${edition}s7_variants.html?${query}`, panel);
            const line = (message || "").trim();
            const want = nativeError(["--example", "s7_variants", "--", "--weights", prompt,
                ...(variant ? ["--variant", variant] : [])]);
            const output = await page.textContent(`${panel} pre.play-output`);
            const maps = await page.locator(`${panel} svg`).count();
            check(state === "error" && line === "error: " + want && output === "" && maps === 0 &&
                errors.length === 0, `${edition || "en/"}s7_variants?${query}: "${line}"`,
                `state ${state}; native "${want}"; ${errors.join(" ")}`);
            await page.close();
        }
    }
}

/** Stage 8's panel: its probes are the lines of `s8_heads --phase --model aon2`, and it draws and ablates. */
async function headsChecks(b) {
    console.log("stage 8: the heads panel's probes, as s8_heads --phase --model aon2 records them");
    const panel = ".play-panel[data-play=heads]";
    const steps = 200;
    const want = cargo(["--example", "s8_heads", "--", "--phase", "--model", "aon2", "--steps", String(steps),
        "--every", "100", "--data", CORPUS, "--no-download"]).stdout.split("\n")
        .filter((l) => l && !l.startsWith("#")).map((l) => l + "\n").join("");
    const text = "ROMEO: ROMEO:";
    for (const edition of EDITIONS) {
        const query = `heads-train=${steps}&pattern=${encodeURIComponent(text)}&ablate=b1h2`;
        const { page, state, message, errors } = await openPanel(b, `/${edition}s8_heads.html?${query}`, panel);
        await page.waitForSelector(`${panel}[data-loaded]`, { timeout: TIMEOUT });
        const got = await page.textContent(`${panel} pre.play-probes`);
        const cells = await page.locator(`${panel} .play-heads-cell[data-induction]`).count();
        const maps = await page.locator(`${panel} .play-heads-maps svg`).count();
        const ablated = (await page.textContent(`${panel} .play-heads-ablation`)).trim();
        const rate = (await page.textContent(`${panel} .play-heads-steps`)).trim();
        // The scores chart: its two curves, a point per probe.
        const curves = await page.$$eval(`${panel} .play-heads-scores polyline`, (ns) => ns.map((n) => n.dataset.points));
        const probes = String(want.split("\n").length - 1);
        check(JSON.stringify(curves) === JSON.stringify([probes, probes]),
            `${edition || "en/"}s8_heads: the scores chart draws ${probes} probes per curve`, JSON.stringify(curves));
        check(state === "paused" && got === want && cells === 8 && maps === 8 && ablated.includes("b1h2") &&
            !ablated.startsWith("error") && errors.length === 0,
        `${edition || "en/"}s8_heads?${query}: ${want.split("\n").length - 1} probe lines equal, 8 heads, ` +
            `8 maps; "${ablated}"; ${rate}`,
        state !== "paused" ? `state ${state}: ${message} ${errors.join(" ")}` :
            got !== want ? firstDifference(got, want) : `cells ${cells}, maps ${maps}; ${errors.join(" ")}`);
        await page.close();
    }
    // A character outside the corpus's, a text over the context and a head the model lacks: one line each.
    const bad = [`heads-train=1&pattern=${encodeURIComponent("Roméo")}`, `heads-train=1&pattern=${"a".repeat(65)}`,
        "heads-train=1&ablate=b2h0"];
    for (const [i, query] of bad.entries()) {
        const edition = EDITIONS[i % EDITIONS.length];
        const { page, errors } = await openPanel(b, `/${edition}s8_heads.html?${query}`, panel);
        await page.waitForSelector(`${panel}[data-loaded]`, { timeout: TIMEOUT });
        const where = query.includes("ablate") ? ".play-heads-ablation" : ".play-heads-maps";
        const line = (await page.textContent(`${panel} ${where}`)).trim();
        check(line.startsWith("error: ") && !line.includes("\n") && errors.length === 0,
            `${edition || "en/"}s8_heads?${query.slice(0, 40)}: "${line}"`, errors.join(" "));
        await page.close();
    }
}

/** Stage 5's training panel with stage 7's variants: the native losses, and the native one-line errors. */
async function trainVariantsChecks(b) {
    console.log("stage 5 with stage 7's variants: the panel's losses are the native --loss-csv");
    const panel = ".play-panel[data-play=train]";
    const runs = [
        ["", ["--heads", "4", "--kv-heads", "2", "--window", "8", "--rope", "--residual", "--layer-norm"]],
        ["zh-CN/", ["--heads", "4", "--kv-heads", "1", "--rope"]],
        ["zh-CN/", ["--qkv", "--window", "5"]],
        ["", ["--heads", "4", "--latent", "16", "--rope", "--layer-norm"]],
    ];
    for (const [edition, flags] of runs) {
        const want = nativeLosses(100, flags);
        const params = ["train=100", ...trainParams(flags)];
        const { page, state, message, errors } = await openPanel(b, `/${edition}s5_gpt.html?${params.join("&")}`,
            panel);
        const got = await page.textContent(`${panel} pre.play-losses`);
        const command = await page.textContent(`${panel} .play-command`);
        // The command line names each flag with its value, in any order.
        const named = flags.every((f, i) => f.startsWith("--") ? command.includes(` ${f}`) :
            command.includes(` ${flags[i - 1]} ${f}`));
        check(state === "done" && got === want && named && errors.length === 0,
            `${edition || "en/"}s5_gpt?${params.join("&")}: 100 loss lines equal; "${command}"`,
            state !== "done" ? `state ${state}: ${message} ${errors.join(" ")}` :
                got !== want ? firstDifference(got, want) : `${errors.join("\n")}`);
        await page.close();
    }
    const bad = [
        ["", ["--heads", "4", "--kv-heads", "3"]],
        ["zh-CN/", ["--window", "0"]],
        ["", ["--kv-heads", "two"]],
        ["zh-CN/", ["--latent", "65"]],
    ];
    for (const [edition, flags] of bad) {
        const params = ["train=10", ...trainParams(flags)];
        const { page, state, message, errors } = await openPanel(b, `/${edition}s5_gpt.html?${params.join("&")}`,
            panel);
        const line = (message || "").trim();
        const want = nativeError(["--example", "s5_gpt", "--", ...flags, "--max-steps", "1", "--data", CORPUS,
            "--no-download"]);
        check(state === "error" && (line === want || line === "error: " + want) && errors.length === 0,
            `${edition || "en/"}s5_gpt?${params.join("&")}: "${line}"`,
            `state ${state}; native "${want}"; ${errors.join(" ")}`);
        await page.close();
    }
}

/** The URL parameters of s5_gpt's flags (`--heads 4 --residual` is `heads=4&residual`). */
function trainParams(flags) {
    const params = [];
    for (let i = 0; i < flags.length; i++) {
        const name = flags[i].slice(2);
        const value = flags[i + 1] !== undefined && !flags[i + 1].startsWith("--") ? flags[++i] : null;
        params.push(value === null ? name : `${name}=${encodeURIComponent(value)}`);
    }
    return params;
}

// The product kernels a page can be made to take: its own choice (fused lanes where relaxed SIMD
// validates and rounds once), and the exact float64 lanes.
// The page's paths: which product kernel, on how many threads. The same bits on each.
const PATHS = [["", "its own choice"], ["kernel=f64", "f64"], ["threads=1", "one thread"],
    ["kernel=f64&threads=1", "f64 on one thread"]];

async function trainChecks(b) {
    console.log("stage 5: the panel's losses are the native --loss-csv, on each path (kernel, threads)");
    const sequel = ["--heads", "4", "--residual", "--layer-norm", "--dropout", "0.1"];
    const runs = [
        ["", 100, [], PATHS],
        ["", 100, sequel, PATHS],
        ["", 100, ["--qkv", "--mask-value", "0"], [PATHS[0]]],
        ["zh-CN/", 100, [], [PATHS[0]]],
        ["", 300, [], [PATHS[0]]],
    ];
    const pathsTaken = new Set();
    const isolated = b.isolated;
    for (const [edition, steps, flags, kernels] of runs) {
        const want = nativeLosses(steps, flags);
        for (const [kernelParam] of kernels) {
            const params = [`train=${steps}`, ...trainParams(flags), ...(kernelParam ? [kernelParam] : [])];
            const start = Date.now();
            const { page, state, message, errors } = await openPanel(b,
                `/${edition}s5_gpt.html?${params.join("&")}`, ".play-panel[data-play=train]");
            const seconds = (Date.now() - start) / 1000;
            const got = await page.textContent("pre.play-losses");
            const panel = ".play-panel[data-play=train]";
            const rate = await page.getAttribute(panel, "data-steps-per-second");
            const kernel = await page.getAttribute(panel, "data-kernel");
            const threads = await page.getAttribute(panel, "data-threads");
            pathsTaken.add(`${kernel} on ${threads}`);
            const forced = kernelParam.includes("kernel=f64");
            // One thread where the address says so; several wherever shared memory can be had.
            const threadsRight = kernelParam.includes("threads=1") ? threads === "1"
                : threads === String(isolated ? b.cores : 1);
            check(state === "done" && got === want && errors.length === 0 && (!forced || kernel === "f64") &&
                threadsRight,
                `${edition || "en/"}s5_gpt?${params.join("&")}: ${steps} loss lines equal (kernel ${kernel}, ` +
                `${threads} thread(s), ${rate} steps/s in the panel, ${seconds.toFixed(1)} s for the page)`,
                state !== "done" ? `state ${state}: ${message} ${errors.join(" ")}` :
                    got !== want ? firstDifference(got, want) :
                        `${errors.join("\n")} kernel ${kernel}, ${threads} thread(s) (isolated: ${isolated})`);
            if (steps >= 200) {
                await sampleCheck(page, steps, flags);
            }
            await page.close();
        }
    }
    console.log(`  paths taken (kernel on threads): ${[...pathsTaken].join(", ")}`);
    await testLossCheck(b);
    await wholeChapterCheck(b);
    await notIsolatedCheck(b);
}

/** Where the book's service worker cannot run, the page is not isolated: one thread, saying why, same bits. */
async function notIsolatedCheck(b) {
    const context = await b.browser.newContext({ serviceWorkers: "block" });
    context.on("request", (request) => b.requests.push(request.url()));
    const panel = ".play-panel[data-play=train]";
    for (const [edition, reason] of [["", "cross-origin isolated page"], ["zh-CN/", "跨源隔离"]]) {
        const page = await context.newPage();
        await page.goto(`${b.origin}/${edition}s5_gpt.html?train=100`);
        await page.waitForSelector(`${panel}[data-state=done]`, { timeout: TIMEOUT });
        const got = await page.textContent(`${panel} pre.play-losses`);
        const threads = await page.getAttribute(panel, "data-threads");
        const line = ((await page.textContent(`${panel} .play-engine`)) || "").trim();
        const want = nativeLosses(100, []);
        check(got === want && threads === "1" && line.includes(reason) && !line.includes("\n"),
            `${edition || "en/"}s5_gpt?train=100 without service workers: the native losses on one thread; "${line}"`,
            got !== want ? firstDifference(got, want) : `threads ${threads}`);
        await page.close();
    }
    await context.close();
}

/** The sample after step 200 is the one `s5_gpt --max-steps 200` prints after its test loss. */
async function sampleCheck(page, steps, flags) {
    const samples = await page.$$eval(".play-sample-text", (pres) => pres.map((p) => p.textContent));
    const shown = samples[samples.length - 1] || "";
    const length = [...shown].length - "ROMEO:".length;
    const chapter = cargo(["--example", "s5_gpt", "--", "--max-steps", "200", "--sample-len", String(length),
        "--data", CORPUS, "--no-download", "--quiet", "--log-every", "0", ...flags]).stdout;
    const want = chapter.slice(chapter.indexOf("\n\n", chapter.lastIndexOf("\nloss: ")) + 2).replace(/\n$/, "");
    check(samples.length === Math.floor(steps / 200) && shown === want,
        `${samples.length} sample(s) shown along the way; the one after step 200 is the chapter's ` +
        `sample after --max-steps 200 (${length} characters)`, firstDifference(shown, want));
}

/** `?train=100&test` ends with the test loss that `s5_gpt --max-steps 100` prints. */
async function testLossCheck(b) {
    const panel = ".play-panel[data-play=train]";
    const want = nativeTestLoss(100, []);
    const { page, state, message } = await openPanel(b, "/s5_gpt.html?train=100&test", panel);
    const got = await page.getAttribute(panel, "data-test-loss");
    const line = ((await page.textContent(`${panel} .play-test-loss`)) || "").trim();
    check(state === "done" && got === want && line.includes(want),
        `s5_gpt?train=100&test: the test loss ${got}, as s5_gpt --max-steps 100 prints it: "${line}"`,
        `state ${state}: ${message}; native ${want}`);
    await page.close();
}

/** "Train the whole chapter" sets the chapter's flags and all of its steps, and starts. */
async function wholeChapterCheck(b) {
    const panel = ".play-panel[data-play=train]";
    const page = await b.context.newPage();
    await page.goto(b.origin + "/s5_gpt.html?seed=7&qkv&heads=2&train=5");
    await page.waitForSelector(`${panel}[data-state=done]`, { timeout: TIMEOUT });
    await page.click(`${panel} .play-whole`);
    await page.waitForFunction((p) => document.querySelector(p).dataset.state === "running" &&
        Number(document.querySelector(p).dataset.steps || 0) >= 10, panel, { timeout: TIMEOUT });
    await page.click(`${panel} .play-start`); // Pause
    await page.waitForSelector(`${panel}[data-state=paused]`, { timeout: TIMEOUT });
    const steps = await page.inputValue(`${panel} .play-steps`);
    const command = await page.textContent(`${panel} .play-command`);
    const got = await page.textContent(`${panel} pre.play-losses`);
    const trained = got.trim().split("\n").length - 1;
    const want = nativeLosses(trained, []);
    const line = ((await page.textContent(`${panel} .play-engine`)) || "").trim();
    check(steps === "31368" && command.endsWith("--max-steps 31368 --loss-csv loss.csv --seed 42") && got === want,
        `"Train the whole chapter": ${steps} steps, the chapter's flags; paused after ${trained}, the native ` +
        `losses; "${line}"`, `steps ${steps}; command ${command}; ${firstDifference(got, want)}`);
    await page.close();
}

/** Start, Pause and Go on by hand, and the two mask values side by side: the same losses still. */
const BY_HAND_STEPS = 1000;

async function trainByHandChecks(b) {
    console.log("stage 5 by hand: pausing changes nothing; -1e9 and 0 side by side");
    const panel = ".play-panel[data-play=train]";
    const page = await b.context.newPage();
    await page.goto(b.origin + "/s5_gpt.html");
    await page.waitForSelector(`${panel}[data-state=idle]`);
    // Long enough that Pause lands mid-run on every core (two threads train 100 steps in well under
    // a second).
    await page.fill(`${panel} .play-steps`, String(BY_HAND_STEPS));
    await page.click(`${panel} .play-start`);
    await page.waitForFunction((p) => Number(document.querySelector(p).dataset.steps || 0) >= 20, panel,
        { timeout: TIMEOUT });
    await page.click(`${panel} .play-start`); // now it says Pause
    await page.waitForSelector(`${panel}[data-state=paused]`, { timeout: TIMEOUT });
    const pausedAt = Number(await page.getAttribute(panel, "data-steps"));
    await page.click(`${panel} .play-start`); // Go on
    await page.waitForSelector(`${panel}[data-state=done]`, { timeout: TIMEOUT });
    const got = await page.textContent(`${panel} pre.play-losses`);
    const want = nativeLosses(BY_HAND_STEPS, []);
    check(got === want && pausedAt < BY_HAND_STEPS,
        `paused at step ${pausedAt}, went on to ${BY_HAND_STEPS}: the same losses`,
        got !== want ? firstDifference(got, want) : `paused at ${pausedAt}`);

    await page.fill(`${panel} .play-steps`, "60");
    await page.selectOption(`${panel} .play-mask`, "both");
    await page.click(`${panel} .play-start`);
    await page.waitForSelector(`${panel}[data-state=done]`, { timeout: TIMEOUT });
    const both = await page.$$eval(`${panel} pre.play-losses`, (pres) => pres.map((p) => p.textContent));
    const wantBoth = [nativeLosses(60, []), nativeLosses(60, ["--mask-value", "0"])];
    check(both.length === 2 && both[0] === wantBoth[0] && both[1] === wantBoth[1],
        `-1e9 and 0 side by side, 60 steps each: both equal the native runs`,
        both.length !== 2 ? `${both.length} loss blocks` : [0, 1].filter((k) => both[k] !== wantBoth[k])
            .map((k) => firstDifference(both[k], wantBoth[k])).join("\n"));
    await page.close();
}

async function generateChecks(b) {
    console.log("stage 5: generation from the checkpoint equals s5_gpt generate");
    const cases = [
        { prompt: "ROMEO:", temperature: "1", topK: "", seed: "42", len: "200" },
        { prompt: "JULIET:", temperature: "0.8", topK: "10", seed: "7", len: "300" },
        { prompt: "ROMEO:", temperature: "1", topK: "", seed: "3", len: "150", noCache: true },
    ];
    for (const [k, c] of cases.entries()) {
        const flags = ["--checkpoint", CHECKPOINT, "--prompt", c.prompt, "--temperature", c.temperature,
            "--seed", c.seed, "--sample-len", c.len, ...(c.topK ? ["--top-k", c.topK] : []),
            ...(c.noCache ? ["--no-cache"] : [])];
        const want = cargo(["--example", "s5_gpt", "--", "generate", ...flags]).stdout;
        const query = `?prompt=${encodeURIComponent(c.prompt)}&temperature=${c.temperature}` +
            `${c.topK ? "&top-k=" + c.topK : ""}&sample-seed=${c.seed}&sample-len=${c.len}` +
            `${c.noCache ? "&no-cache" : ""}`;
        const edition = EDITIONS[k % EDITIONS.length];
        const { page, state, message, errors } = await openPanel(b, `/${edition}s5_gpt.html${query}`,
            ".play-panel[data-play=sample]");
        const got = await page.textContent("pre.play-generated");
        check(state === "done" && got === want && errors.length === 0,
            `${edition || "en/"}s5_gpt${query}: ${want.length} bytes equal`,
            state !== "done" ? `state ${state}: ${message} ${errors.join(" ")}` :
                got !== want ? firstDifference(got, want) : errors.join("\n"));
        const maps = await page.locator(".play-attention svg").count();
        check(maps > 0, `${maps} attention map(s) of the prompt drawn`);
        if (c.noCache) {
            const command = await page.textContent(".play-panel[data-play=sample] .play-command");
            check(command.endsWith(" --no-cache"), `its command ends with --no-cache: "${command}"`);
        }
        await page.close();
    }
}

/**
 * A reader's own checkpoint, trained here with stage 7's variants (`s5_gpt train --save DIR`), chosen in
 * the sample panel: its distribution and its sample are what `generate --checkpoint DIR` prints, and
 * the maps grey the keys its window hides.
 */
async function ownCheckpointChecks(b) {
    console.log("stage 5: a reader's checkpoint with stage 7's variants, in the sample panel");
    const panel = ".play-panel[data-play=sample]";
    const dir = mkdtempSync(join(tmpdir(), "play-own-"));
    const variant = ["--heads", "4", "--kv-heads", "2", "--window", "4", "--rope", "--residual", "--layer-norm"];
    try {
        cargo(["--example", "s5_gpt", "--", "train", "--data", CORPUS, "--no-download", "--quiet", "--log-every", "0",
            "--max-steps", "30", "--save", dir, ...variant]);
        const prompt = "ROMEO:";
        const wantProbs = cargo(["--example", "s5_gpt", "--", "generate", "--checkpoint", dir, "--prompt", prompt,
            "--temperature", "1", "--probs"]).stdout;
        const want = cargo(["--example", "s5_gpt", "--", "generate", "--checkpoint", dir, "--prompt", prompt,
            "--temperature", "1", "--seed", "42", "--sample-len", "300"]).stdout;
        for (const edition of EDITIONS) {
            const page = await b.context.newPage();
            const errors = [];
            page.on("pageerror", (e) => errors.push(String(e)));
            await page.goto(`${b.origin}/${edition}s5_gpt.html`, { waitUntil: "domcontentloaded" });
            await page.waitForSelector(`${panel}[data-state=idle]`, { timeout: TIMEOUT });
            await page.waitForFunction((p) => document.querySelector(p).dataset.probsState !== "running", panel);
            await page.setInputFiles(`${panel} input.play-checkpoint-files`,
                [join(dir, "config.json"), join(dir, "model.safetensors")]);
            await page.waitForFunction((p) => ["done", "error", "unavailable"]
                .includes(document.querySelector(p).dataset.probsState) &&
                document.querySelector(p).dataset.checkpoint === "own", panel, { timeout: TIMEOUT });
            const { state: probsState, got: probs } = await probsShown(page);
            await page.click(`${panel} .play-generate`);
            await page.waitForSelector(`${panel}[data-state=done], ${panel}[data-state=error]`, { timeout: TIMEOUT });
            const got = await page.textContent(`${panel} pre.play-generated`);
            const info = await page.textContent(`${panel} .play-checkpoint`);
            const command = await page.textContent(`${panel} .play-command`);
            // The prompt's 6 characters under a window of 4: 3 keys of the past hidden in each map too.
            const greyed = await page.$$eval(`${panel} .play-attention svg`, (maps) => maps.map((m) =>
                [...m.querySelectorAll("rect")].filter((r) =>
                    r.getAttribute("fill") === window.attentionPanels.facts.masked).length));
            check(probsState === "done" && probs === wantProbs && got === want && errors.length === 0 &&
                command.includes("--checkpoint DIR ") && greyed.length === 8 && greyed.every((g) => g === 15 + 3),
                `${edition || "en/"}s5_gpt: the reader's checkpoint (${variant.join(" ")}, 30 steps): --probs and ` +
                `${want.length} bytes of the sample equal; "${info.trim()}"; greyed cells per map ${greyed.join(",")}`,
                probs !== wantProbs ? firstDifference(probs, wantProbs) : got !== want ? firstDifference(got, want) :
                    `command "${command}"; greyed ${greyed}; ${errors.join(" ")}`);
            await page.close();
        }
    } finally {
        rmSync(dir, { recursive: true, force: true });
    }
}

/** The prompt of the long case: more characters than the checkpoint's context holds. */
function longPrompt() {
    const config = JSON.parse(readFileSync(join(CHECKPOINT, "config.json"), "utf8"));
    const context = JSON.stringify(config).match(/"context_size":(\d+)/);
    const text = readFileSync(CORPUS, "utf8").slice(0, 2000);
    return { prompt: text.slice(0, (context ? Number(context[1]) : 256) + 40), context: context && context[1] };
}

/** What `s5_gpt generate --checkpoint … --prompt P --temperature T [--top-k K] --probs` prints. */
function nativeProbs(c) {
    return cargo(["--example", "s5_gpt", "--", "generate", "--checkpoint", CHECKPOINT, "--prompt", c.prompt,
        "--temperature", c.temperature, ...(c.topK ? ["--top-k", c.topK] : []), "--probs"]).stdout;
}

/** Waits until the sample panel's distribution has an answer; its state, line, text and bars. */
async function probsShown(page) {
    const panel = ".play-panel[data-play=sample]";
    await page.waitForSelector(["done", "error", "unavailable"].map((s) => `${panel}[data-probs-state=${s}]`)
        .join(", "), { timeout: TIMEOUT });
    return {
        state: await page.getAttribute(panel, "data-probs-state"),
        message: ((await page.textContent(`${panel} .play-probs-box .play-message`)) || "").trim(),
        got: await page.textContent(`${panel} pre.play-probs`),
        bars: await page.locator(`${panel} .play-probs-bars rect[fill]:not([fill=white])`).count(),
        more: ((await page.textContent(`${panel} .play-probs-more`)) || "").trim(),
    };
}

async function probsChecks(b) {
    console.log("stage 5: the next character's distribution equals s5_gpt generate --probs");
    const long = longPrompt();
    const cases = [
        { prompt: "ROMEO:", temperature: "1", topK: "" },
        { prompt: "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\n", temperature: "0.5",
            topK: "" },
        { prompt: long.prompt, temperature: "2", topK: "", what: `${[...long.prompt].length} characters, ` +
            `over the context of ${long.context}` },
        { prompt: "JULIET:\nO Romeo, Romeo! wherefore art thou R", temperature: "1", topK: "5" },
    ];
    for (const [k, c] of cases.entries()) {
        const want = nativeProbs(c);
        const query = `?probs=${encodeURIComponent(c.prompt)}&temperature=${c.temperature}` +
            `${c.topK ? "&top-k=" + c.topK : ""}`;
        const edition = EDITIONS[k % EDITIONS.length];
        const page = await b.context.newPage();
        const errors = [];
        page.on("pageerror", (e) => errors.push(String(e)));
        await page.goto(`${b.origin}/${edition}s5_gpt.html${query}`);
        const { state, message, got, bars, more } = await probsShown(page);
        const lines = want.split("\n").filter((l) => l);
        const name = `${edition || "en/"}s5_gpt?probs=${c.what || JSON.stringify(c.prompt)}&temperature=` +
            `${c.temperature}${c.topK ? "&top-k=" + c.topK : ""}`;
        check(state === "done" && got === want && errors.length === 0, `${name}: ${lines.length} lines equal`,
            state !== "done" ? `state ${state}: ${message} ${errors.join(" ")}` :
                got !== want ? firstDifference(got, want) : errors.join("\n"));
        check(bars === Math.min(lines.length, 20) && (lines.length > 20) === (more !== ""),
            `${bars} bars drawn${more ? `, then "${more}"` : ""}`);
        if (c.topK) {
            const p = lines.map((l) => l.slice(l.lastIndexOf(" ") + 1));
            check(lines.length >= 1 && p.slice(Number(c.topK) - 1).every((x) => x === p[Number(c.topK) - 1]),
                `--top-k ${c.topK}: ${lines.length} characters can be drawn`, want);
        }
        await page.close();
    }

    // Editing the prompt redraws the distribution (after the panel's pause for typing).
    const page = await b.context.newPage();
    await page.goto(`${b.origin}/s5_gpt.html?probs=ROMEO:`);
    await probsShown(page);
    const edited = { prompt: "KING RICHARD III:\nNow is the winter", temperature: "0.5", topK: "" };
    const want = nativeProbs(edited);
    await page.fill(".play-panel[data-play=sample] .play-temperature", edited.temperature);
    await page.fill(".play-panel[data-play=sample] .play-prompt", edited.prompt);
    const redrawn = await page.waitForFunction((w) => {
        const node = document.querySelector(".play-panel[data-play=sample]");
        return node.dataset.probsState === "done" && node.querySelector("pre.play-probs").textContent === w;
    }, want, { timeout: 60000 }).then(() => true, () => false);
    const command = await page.textContent(".play-panel[data-play=sample] .play-probs-box .play-command");
    check(redrawn && command.endsWith(" --temperature 0.5 --probs"),
        `typing a prompt and a temperature redraws the distribution: ${want.split("\n").length - 1} lines equal`,
        `redrawn: ${redrawn}; command: ${command}`);
    await page.close();

    for (const [what, query, flags] of [
        ["a prompt character outside the vocabulary", "probs=" + encodeURIComponent("ROMEO€"), ["--prompt", "ROMEO€"]],
        ["a temperature of 0", "probs=ROMEO:&temperature=0", ["--prompt", "ROMEO:", "--temperature", "0"]],
    ]) {
        const page = await b.context.newPage();
        await page.goto(`${b.origin}/zh-CN/s5_gpt.html?${query}`);
        const { state, message, got, bars } = await probsShown(page);
        const want = nativeError(["--example", "s5_gpt", "--", "generate", "--checkpoint", CHECKPOINT, ...flags,
            "--probs"]);
        check(state === "error" && message === "error: " + want && !got && bars === 0,
            `--probs with ${what}: "${message}"`, `state ${state}; native "error: ${want}"`);
        await page.close();
    }
}

async function badInputChecks(b) {
    console.log("bad input: the command line's one-line message, in the panel");
    const cases = [
        {
            what: "a seed out of range",
            path: "/s2_trainable.html?seed=18446744073709551616&run",
            panel: ".play-panel[data-play=stage]",
            native: ["--example", "s2_trainable", "--", "--seed", "18446744073709551616"],
        },
        {
            what: "heads that do not divide the width (stage 4)",
            path: "/zh-CN/s4_multihead.html?heads=3&run",
            panel: ".play-panel[data-play=stage]",
        },
        {
            what: "heads that do not divide the width (stage 5)",
            path: "/s5_gpt.html?train=10&heads=5",
            panel: ".play-panel[data-play=train]",
            native: ["--example", "s5_gpt", "--", "--heads", "5", "--max-steps", "1", "--data", CORPUS,
                "--no-download"],
        },
        {
            what: "a prompt character outside the vocabulary",
            path: "/s5_gpt.html?prompt=" + encodeURIComponent("ROMEO€") + "&sample-len=10",
            panel: ".play-panel[data-play=sample]",
            native: ["--example", "s5_gpt", "--", "generate", "--checkpoint", CHECKPOINT, "--prompt", "ROMEO€",
                "--sample-len", "10"],
        },
    ];
    for (const c of cases) {
        const { page, state, message, errors } = await openPanel(b, c.path, c.panel);
        const line = (message || "").trim();
        const want = c.native ? nativeError(c.native) : null;
        const same = want === null || line === want || line === "error: " + want;
        check(state === "error" && line && !line.includes("\n") && same && errors.length === 0,
            `${c.what}: "${line}"`, `state ${state}; native "${want}"; ${errors.join(" ")}`);
        await page.close();
    }
}

/** The panels' labels (book/theme/play-labels.js): the same keys in both languages, none left empty. */
function labels() {
    const text = readFileSync(join(ROOT, "book", "theme", "play-labels.js"), "utf8");
    return JSON.parse(text.slice(text.indexOf("=") + 1, text.lastIndexOf(";")));
}

async function labelChecks(b) {
    console.log("the panels' labels, in each edition's language");
    const all = labels();
    const en = Object.keys(all.en).sort();
    const zh = Object.keys(all["zh-CN"]).sort();
    check(JSON.stringify(en) === JSON.stringify(zh) && en.every((k) => all.en[k] && all["zh-CN"][k]),
        `play-labels.js: ${en.length} labels in English and ${zh.length} in Chinese, the same keys`,
        `only English: ${en.filter((k) => !zh.includes(k))}; only Chinese: ${zh.filter((k) => !en.includes(k))}`);
    for (const [edition, lang] of [["", "en"], ["zh-CN/", "zh-CN"]]) {
        const page = await b.context.newPage();
        await page.goto(`${b.origin}/${edition}s5_gpt.html`);
        await page.waitForSelector(".play-panel[data-play=sample][data-state=idle]");
        const shown = [
            [await page.textContent(".play-panel[data-play=train] .play-start"), all[lang].start],
            [await page.textContent(".play-panel[data-play=sample] .play-generate"), all[lang].generate],
        ];
        check(shown.every(([got, want]) => got === want), `${edition || "en/"}s5_gpt: the buttons say ` +
            shown.map(([got]) => JSON.stringify(got)).join(" and "));
        await page.close();
    }
}

async function fmaCheck(b) {
    console.log("the page's product kernels against a correctly rounded fmaf");
    for (const [kernelParam, what] of PATHS) {
        const page = await b.context.newPage();
        await page.goto(b.origin + "/s5_gpt.html" + (kernelParam ? "?" + kernelParam : ""));
        await page.waitForFunction(() => window.attentionPlay);
        const mismatches = await page.evaluate(() => window.attentionPlay.call("fma_self_check", 1000000, 1));
        const info = await page.evaluate(() => window.attentionPlay.call("engine_info"));
        check(mismatches === 0 && (!kernelParam.includes("kernel=f64") || info.kernel === "f64"),
            `${what}: the ${info.build} build chose kernel ${info.kernel}; fma_self_check(1000000, 1) = ` +
            `${mismatches}`);
        await page.close();
    }
}

async function fileChecks(b) {
    console.log("without the WebAssembly, or opened from disk, a panel says what to do");
    for (const edition of EDITIONS) {
        const { page, state, message } = await openPanel(b, `/no-wasm/${edition}s3_causal.html?run`,
            ".play-panel[data-play=stage]");
        const text = (message || "").trim();
        check(state === "unavailable" && text.includes("rustup target add wasm32-unknown-unknown") &&
            !text.includes("\n"), `${edition || "en/"}s3_causal.html built without wasm says "${text}"`);
        await page.close();
    }
    for (const edition of EDITIONS) {
        const local = await b.context.newPage();
        await local.goto("file://" + join(BOOK, edition, "s2_trainable.html"));
        await local.waitForSelector(".play-panel[data-state=unavailable]", { timeout: 30000 });
        const text = (await local.textContent(".play-panel .play-message")).trim();
        check(text.includes("mdbook serve book") && !text.includes("\n"),
            `${edition || "en/"}s2_trainable.html from file:// says "${text}"`);
        await local.close();
    }
}

/**
 * Trains `steps` steps of the tutorial's model `runs` times on each product kernel; prints each run's
 * rate inside Trainer.run (loading excluded) and from the click, and their medians.
 */
async function speed(b, runs, steps) {
    console.log(`training speed at the tutorial's size: ${runs} runs of ${steps} steps per path in headless ` +
        `Chromium (${b.cores} cores)`);
    const panel = ".play-panel[data-play=train]";
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    for (const [kernelParam, what] of PATHS) {
        const rates = [];
        const walls = [];
        let kernel = null;
        let threads = null;
        for (let i = 0; i < runs; i++) {
            const page = await b.context.newPage();
            await page.goto(b.origin + "/s5_gpt.html" + (kernelParam ? "?" + kernelParam : ""));
            await page.waitForSelector(`${panel}[data-state=idle]`);
            await page.fill(`${panel} .play-steps`, String(steps));
            // Timed from the click to the last step: loading the wasm and the corpus counts, too.
            const start = Date.now();
            await page.click(`${panel} .play-start`);
            await page.waitForSelector(`${panel}[data-state=done]`, { timeout: TIMEOUT });
            const wall = (Date.now() - start) / 1000;
            const rate = Number(await page.getAttribute(panel, "data-steps-per-second"));
            kernel = await page.getAttribute(panel, "data-kernel");
            threads = await page.getAttribute(panel, "data-threads");
            rates.push(rate);
            walls.push(steps / wall);
            console.log(`  ${what}, run ${i + 1}: kernel ${kernel} on ${threads} thread(s), ` +
                `${rate.toFixed(1)} steps/s inside ` +
                `Trainer.run, ${(steps / wall).toFixed(1)} steps/s from the click to the last step ` +
                `(${wall.toFixed(1)} s)`);
            await page.close();
        }
        console.log(`  ${what} (kernel ${kernel} on ${threads} thread(s)), median: ${median(rates).toFixed(1)} steps/s inside ` +
            `Trainer.run, ${median(walls).toFixed(1)} steps/s from the click`);
    }
}

async function main() {
    const args = process.argv.slice(2);
    const speedRuns = args[0] === "--speed" ? Number(args[1] || 5) : 0;
    const only = args[0] === "--only" ? args.slice(1) : [];
    for (const needed of [join(BOOK, "play", "pkg"), CHECKPOINT, CORPUS, join(BOOK, "zh-CN", "s1_simple.html")]) {
        if (!existsSync(needed)) {
            console.error(`error: ${needed} is missing; build the book with its panels first: bash book/build.sh`);
            process.exit(1);
        }
    }
    const { server, served } = await serve(BOOK);
    const origin = `http://127.0.0.1:${server.address().port}`;
    const b = await openBrowser(origin);
    try {
        if (speedRuns) {
            await speed(b, speedRuns, 1000);
            return;
        }
        // A group that throws (a native run that fails, a page that never finishes) fails alone.
        const groups = {
            stages: () => stageChecks(b),
            flash: () => flashChecks(b),
            kv: () => kvChecks(b),
            variants: () => variantsChecks(b),
            heads: () => headsChecks(b),
            "train-variants": () => trainVariantsChecks(b),
            train: () => trainChecks(b),
            "train-by-hand": () => trainByHandChecks(b),
            generate: () => generateChecks(b),
            "own-checkpoint": () => ownCheckpointChecks(b),
            probs: () => probsChecks(b),
            "bad-input": () => badInputChecks(b),
            labels: () => labelChecks(b),
            fma: () => fmaCheck(b),
            file: () => fileChecks(b),
            speed: () => speed(b, 1, 300),
        };
        for (const [name, group] of Object.entries(groups)) {
            if (only.length && !only.includes(name)) {
                continue;
            }
            const start = performance.now();
            try {
                await group();
            } catch (e) {
                check(false, `the group "${name}" stopped`, e && e.stack ? e.stack : String(e));
            }
            // Where a long run spends its time, for whoever makes it shorter.
            console.log(`  (the group "${name}" took ${((performance.now() - start) / 1000).toFixed(1)} s)`);
        }
        // The workers' own requests (the wasm, the corpus, the checkpoint) are among those recorded.
        const seen = ["play/pkg/attention_play_bg.wasm", "play/data/tinyshakespeare.txt",
            "play/data/checkpoint/model.safetensors"].filter((path) => b.requests.some((url) => url.endsWith(path)));
        if (!only.length) {
            check(seen.length === 3, `the workers' requests are recorded too: ${seen.join(", ")}`);
        }
        const outside = b.requests.filter((url) => !url.startsWith(origin + "/") && !url.startsWith("file://"));
        check(outside.length === 0, `${b.requests.length} requests, none beyond ${origin} and the file:// pages (the server answered ` +
            `${served.length})`, outside.slice(0, 10).join("\n"));
    } finally {
        await b.browser.close();
        server.close();
    }
    if (!speedRuns) {
        console.log(`${checks - failures} of ${checks} browser checks passed`);
        if (failures) {
            process.exit(1);
        }
    }
}

main().catch((e) => {
    console.error("error: " + (e && e.stack ? e.stack : e));
    process.exit(1);
});
