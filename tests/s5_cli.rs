//! Stage 5 as a tool: `s5_gpt train | generate | eval`, checkpoints, resuming, and the one-line errors of
//! bad input. Most runs are short (tens of steps); the longest trains 12,000 steps for the book's samples.

mod common;

use std::path::Path;

use attention_from_scratch::s5_gpt::app::Config;
use attention_from_scratch::s5_gpt::app::args::Cli;
use attention_from_scratch::s5_gpt::app::checkpoint::{
    self, MODEL_FILE, OPTIMIZER_FILE, TrainState,
};
use attention_from_scratch::s5_gpt::app::command;
use attention_from_scratch::s5_gpt::app::files::corpus_warning;
use attention_from_scratch::s5_gpt::app::files::default_data_path;
use clap::CommandFactory;
use common::Scratch;
use common::cli::{fails, ok};
use std::ops::ControlFlow;

/// A fresh folder for one test of this file.
fn scratch(name: &str) -> Scratch {
    common::scratch("s5_cli", name)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `train --save DIR --max-steps N`, quietly.
fn train_into(dir: &Path, steps: usize) {
    let steps = steps.to_string();
    ok(&[
        "train",
        "--save",
        path(dir),
        "--max-steps",
        &steps,
        "--quiet",
    ]);
}

/// `train --resume dir --max-steps steps --quiet`: its report.
fn resume_to(dir: &Path, steps: usize) -> String {
    let steps = steps.to_string();
    ok(&[
        "train",
        "--resume",
        path(dir),
        "--max-steps",
        &steps,
        "--quiet",
    ])
}

/// The three files of checkpoints `a` and `b` are byte for byte the same.
fn assert_same_checkpoint(a: &Path, b: &Path, when: &str) {
    for file in [MODEL_FILE, OPTIMIZER_FILE, "config.json"] {
        assert!(bytes(a, file) == bytes(b, file), "{file} differs {when}");
    }
}

fn bytes(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap()
}

// ---------------------------------------------------------------------------------------------------
// Checkpoints.
// ---------------------------------------------------------------------------------------------------

#[test]
fn a_checkpoint_holds_every_bit_of_the_trainer() {
    let dir = scratch("round_trip");
    train_into(&dir, 20);
    let cfg = Config {
        max_steps: Some(20),
        ..Config::default()
    };
    let mut trainer = cfg.trainer().unwrap();
    trainer.train(|_| ControlFlow::Continue(())).unwrap();

    let saved = checkpoint::load(&dir).unwrap();
    assert_eq!(saved.config.step, 20);
    let params = trainer.parameters().to_vec();
    assert_eq!(saved.weights.len(), params.len());
    for ((name, saved), p) in saved.weights.iter().zip(&params) {
        assert_eq!(saved.shape, p.shape, "{name}");
        let same = saved
            .data
            .iter()
            .zip(&p.data)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{name} changed on the way through the file");
    }
    let state = saved.train_state().unwrap();
    assert!(
        state == TrainState::of(&trainer),
        "the saved state is the trainer's, bit for bit"
    );
}

/// The layout any safetensors reader sees, read here straight from the bytes: an 8-byte little-endian
/// header length, a JSON header, then the data.
#[test]
fn the_weights_file_has_the_documented_names_and_shapes() {
    let dir = scratch("layout");
    train_into(&dir, 1);
    let file = bytes(&dir, MODEL_FILE);
    let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&file[8..8 + n]).unwrap();
    let header = header.as_object().unwrap();

    let (v, t, c) = (65, 32, 64);
    let mut expected = vec![
        ("tok_emb.weight".to_string(), vec![v, c]),
        ("pos_emb.weight".to_string(), vec![t, c]),
    ];
    for i in 0..2 {
        for (layer, n_out, n_in) in [
            ("attn.out", c, c),
            ("ff.in", 4 * c, c),
            ("ff.out", c, 4 * c),
        ] {
            expected.push((format!("blocks.{i}.{layer}.weight"), vec![n_out, n_in]));
            expected.push((format!("blocks.{i}.{layer}.bias"), vec![n_out]));
        }
    }
    expected.push(("head.weight".to_string(), vec![v, c]));
    expected.push(("head.bias".to_string(), vec![v]));

    assert_eq!(
        header.len(),
        expected.len() + 1,
        "the tensors and __metadata__"
    );
    assert_eq!(header["__metadata__"]["step"], "1");
    let mut data_bytes = 0;
    for (name, shape) in &expected {
        let entry = &header[name];
        assert_eq!(entry["dtype"], "F32", "{name}");
        let got: Vec<usize> = serde_json::from_value(entry["shape"].clone()).unwrap();
        assert_eq!(&got, shape, "{name}");
        let offsets: [usize; 2] = serde_json::from_value(entry["data_offsets"].clone()).unwrap();
        assert_eq!(offsets[1] - offsets[0], 4 * shape.iter().product::<usize>());
        data_bytes += offsets[1] - offsets[0];
    }
    assert_eq!(
        8 + n + data_bytes,
        file.len(),
        "the data fills the rest of the file"
    );
}

#[test]
fn a_resumed_run_ends_bit_identical_to_an_uninterrupted_one() {
    let (whole, parts) = (scratch("whole"), scratch("parts"));
    train_into(&whole, 40);
    train_into(&parts, 15);
    let out = resume_to(&parts, 40);
    assert!(
        out.contains("resuming") && out.contains("after step 15"),
        "{out}"
    );
    assert_same_checkpoint(&whole, &parts, "after resuming");
}

#[test]
fn a_checkpoint_is_not_overwritten_by_another_run() {
    let dir = scratch("keep");
    train_into(&dir, 3);
    let before = bytes(&dir, MODEL_FILE);
    let msg = fails(&["train", "--save", path(&dir), "--max-steps", "5", "--quiet"]);
    assert!(
        msg.contains("already holds a checkpoint") && msg.contains("--overwrite"),
        "{msg}"
    );
    assert!(bytes(&dir, MODEL_FILE) == before, "the checkpoint is kept");
    let args = ["train", "--save", path(&dir), "--max-steps", "5", "--quiet"];
    ok(&[&args[..], &["--overwrite"]].concat());
    assert_eq!(checkpoint::load(&dir).unwrap().config.step, 5);
}

#[test]
fn save_every_writes_checkpoints_along_the_way() {
    let dir = scratch("save_every");
    let args = [
        "train",
        "--save",
        path(&dir),
        "--max-steps",
        "25",
        "--save-every",
        "10",
    ];
    ok(&[&args[..], &["--quiet"]].concat());
    assert_eq!(checkpoint::load(&dir).unwrap().config.step, 25);
}

// ---------------------------------------------------------------------------------------------------
// generate and eval.
// ---------------------------------------------------------------------------------------------------

/// A checkpoint sampled with the chapter's seed gives the chapter run's sample and test loss.
#[test]
fn generate_and_eval_repeat_the_chapter_run() {
    let dir = scratch("chapter_parts");
    train_into(&dir, 30);
    let chapter = ok(&["--max-steps", "30", "--sample-len", "80", "--quiet"]);
    let sample = ok(&["generate", "--checkpoint", path(&dir), "--sample-len", "80"]);
    assert!(
        chapter.ends_with(&sample),
        "chapter:\n{chapter}\ngenerate:\n{sample}"
    );
    assert_eq!(sample.trim_end().chars().count(), "ROMEO:".len() + 80);

    let eval = ok(&["eval", "--checkpoint", path(&dir), "--quiet"]);
    let loss = |text: &str, label: &str| {
        let line = text.lines().find(|l| l.starts_with(label)).unwrap();
        line[label.len()..].trim().to_string()
    };
    assert_eq!(loss(&eval, "test loss:"), loss(&chapter, "loss:"));
}

/// The flags of a model with everything the tutorial's leaves out.
const EVERYTHING: [&str; 6] = [
    "--heads",
    "4",
    "--residual",
    "--layer-norm",
    "--dropout",
    "0.1",
];

#[test]
fn a_checkpoint_records_the_architecture_and_eval_and_generate_rebuild_it() {
    let dir = scratch("architecture");
    let steps = ["--max-steps", "20", "--quiet"];
    ok(&[&["train", "--save", path(&dir)][..], &EVERYTHING, &steps].concat());
    let config: serde_json::Value = serde_json::from_slice(&bytes(&dir, "config.json")).unwrap();
    assert_eq!(config["qkv"], true, "--heads implies --qkv");
    assert_eq!(config["heads"], 4);
    assert_eq!(config["residual"], true);
    assert_eq!(config["layer_norm"], true);
    assert_eq!(config["dropout"], 0.1);
    assert_eq!(config["mask_value"], -1e9);

    let saved = checkpoint::load(&dir).unwrap();
    let names: Vec<&str> = saved.weights.iter().map(|(n, _)| n.as_str()).collect();
    for name in [
        "blocks.0.attn.query.weight",
        "blocks.1.attn.value.bias",
        "blocks.0.ln1.weight",
        "blocks.1.ln2.bias",
        "ln_f.weight",
    ] {
        assert!(names.contains(&name), "{name} is not in {names:?}");
    }
    assert_eq!(
        names.len(),
        16 + 2 * (6 + 4) + 2,
        "the tutorial's, q/k/v and ln per block, ln_f"
    );

    let chapter = ok(&[&EVERYTHING[..], &steps, &["--sample-len", "80"]].concat());
    let sample = ok(&["generate", "--checkpoint", path(&dir), "--sample-len", "80"]);
    assert!(
        chapter.ends_with(&sample),
        "chapter:\n{chapter}\ngenerate:\n{sample}"
    );
    let eval = ok(&["eval", "--checkpoint", path(&dir), "--quiet"]);
    let loss = |text: &str, label: &str| {
        let line = text.lines().find(|l| l.starts_with(label)).unwrap();
        line[label.len()..].trim().to_string()
    };
    assert_eq!(loss(&eval, "test loss:"), loss(&chapter, "loss:"));
}

#[test]
fn a_resumed_run_with_dropout_ends_bit_identical_to_an_uninterrupted_one() {
    let (whole, parts) = (scratch("whole_dropout"), scratch("parts_dropout"));
    let train = |dir: &Path, steps: &str| {
        let args = [
            "train",
            "--save",
            path(dir),
            "--max-steps",
            steps,
            "--quiet",
        ];
        ok(&[&args[..], &EVERYTHING].concat());
    };
    train(&whole, "40");
    train(&parts, "15");
    resume_to(&parts, 40);
    assert_same_checkpoint(&whole, &parts, "after resuming");
}

#[test]
fn resuming_with_another_architecture_is_refused() {
    let dir = scratch("other_architecture");
    train_into(&dir, 3);
    let resume = ["train", "--resume", path(&dir)];
    for (flags, expect) in [
        (
            &["--residual"][..],
            "--residual on differs from the checkpoint's off",
        ),
        (
            &["--heads", "2"],
            "--heads 2 differs from the checkpoint's 1",
        ),
        (
            &["--heads", "1"],
            "--qkv on differs from the checkpoint's off",
        ),
        (&["--layer-norm"], "--layer-norm on differs"),
        (
            &["--dropout", "0.1"],
            "--dropout 0.1 differs from the checkpoint's 0",
        ),
        (
            &["--mask-value", "0"],
            "--mask-value 0 differs from the checkpoint's -1000000000",
        ),
    ] {
        let msg = fails(&[&resume[..], flags].concat());
        assert!(msg.contains(expect), "{flags:?}: {msg}");
    }
}

#[test]
fn temperature_and_top_k_change_the_sample() {
    let dir = scratch("sampling");
    train_into(&dir, 30);
    let sample = |extra: &[&str]| {
        let args = ["generate", "--checkpoint", path(&dir), "--sample-len", "60"];
        ok(&[&args[..], extra].concat())
    };
    let plain = sample(&[]);
    assert_eq!(plain, sample(&["--temperature", "1", "--top-k", "65"]));
    assert_ne!(plain, sample(&["--temperature", "0.5"]));
    assert_ne!(plain, sample(&["--top-k", "3"]));
    assert_ne!(plain, sample(&["--seed", "7"]));
    let greedy = sample(&["--top-k", "1"]);
    assert_eq!(
        greedy,
        sample(&["--top-k", "1", "--seed", "7"]),
        "top-1 is greedy"
    );
}

/// The two samples the book sets side by side: one checkpoint (12,000 steps), drawn cold and narrow, then hot.
/// The book also shows what training it printed, without what changes from run to run.
#[test]
fn a_cold_and_a_hot_sample_for_the_book() {
    let dir = scratch("cold_and_hot");
    let args = ["train", "--save", path(&dir), "--max-steps", "12000"];
    let log = ok(&[&args[..], &["--quiet"]].concat());
    insta::assert_snapshot!("train_log", without_times(&log, &dir));
    let sample = |extra: &[&str]| {
        let args = [
            "generate",
            "--checkpoint",
            path(&dir),
            "--prompt",
            "JULIET:",
            "--sample-len",
            "240",
        ];
        ok(&[&args[..], extra].concat())
    };
    insta::assert_snapshot!(
        "sample_cold",
        sample(&["--temperature", "0.5", "--top-k", "5"])
    );
    insta::assert_snapshot!("sample_hot", sample(&["--temperature", "1.5"]));

    // The distributions the samples are drawn from, after "JULIET:\nI".
    let probs = |extra: &[&str]| {
        let args = ["generate", "--checkpoint", path(&dir), "--probs"];
        let prompt = ["--prompt", "JULIET:\nI"];
        ok(&[&args[..], &prompt, extra].concat())
    };
    let warm = probs(&[]);
    insta::assert_snapshot!("probs", warm);
    assert_is_a_distribution(&warm);
    let top_5 = probs(&["--temperature", "0.5", "--top-k", "5"]);
    insta::assert_snapshot!("probs_cold_top_5", top_5);
    assert_is_a_distribution(&top_5);
    assert!(
        top_5.lines().count() <= 5 + 1,
        "five and a tie at most:\n{top_5}"
    );
    let first = |text: &str| text.lines().next().unwrap()[..6].to_string();
    assert_eq!(
        first(&warm),
        first(&top_5),
        "the likeliest stays the likeliest"
    );
}

/// `generate --probs` lines: likeliest first, each probability above 0, together 1.
fn assert_is_a_distribution(lines: &str) {
    let p: Vec<f64> = lines
        .lines()
        .map(|line| line.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(p.windows(2).all(|w| w[0] >= w[1]), "sorted:\n{lines}");
    assert!(p.iter().all(|&p| p > 0.0), "none of 0:\n{lines}");
    let sum: f64 = p.iter().sum();
    assert!((sum - 1.0).abs() < 1e-5, "sum {sum}:\n{lines}");
}

/// What `train` printed, as the book shows it: each log line without its time per step, and without the
/// last line, which names the checkpoint folder `dir` (a scratch folder here).
fn without_times(log: &str, dir: &Path) -> String {
    let mut lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines.pop(),
        Some(format!("saved {}", dir.display()).as_str())
    );
    let cut = |line: &str| {
        if !line.starts_with("step ") {
            return line.to_string();
        }
        let timed = line
            .strip_suffix(" ms/step")
            .expect("a log line ends with its time");
        timed[..timed.rfind(", ").expect("the time follows the lr")].to_string()
    };
    let lines: Vec<String> = lines.into_iter().map(cut).collect();
    lines.join("\n")
}

#[test]
fn plot_and_csv_show_every_step() {
    let dir = scratch("curves");
    let (svg, csv) = (dir.join("loss.svg"), dir.join("loss.csv"));
    let args = [
        "train",
        "--max-steps",
        "30",
        "--quiet",
        "--plot",
        path(&svg),
    ];
    let out = ok(&[&args[..], &["--loss-csv", path(&csv)]].concat());
    assert!(out.contains("not saved"), "{out}");
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("train loss"),
        "{svg}"
    );
    assert!(!svg.contains("test loss"), "train does not test");
    let csv = std::fs::read_to_string(csv).unwrap();
    assert_eq!(csv.lines().count(), 1 + 30);
}

/// `--eval-every` adds estimates and changes nothing else: the same log lines, the same step, lr
/// and loss columns, the same checkpoint.
#[test]
fn estimates_change_nothing_else() {
    let dir = scratch("estimates");
    let run = |name: &str, extra: &[&str]| {
        let (csv, save) = (dir.join(format!("{name}.csv")), dir.join(name));
        let args = [
            "train",
            "--max-steps",
            "600",
            "--quiet",
            "--log-every",
            "200",
        ];
        let files = ["--loss-csv", path(&csv), "--save", path(&save)];
        let log = ok(&[&args[..], &files, extra].concat());
        let csv = std::fs::read_to_string(csv).unwrap();
        (without_times(&log, &save), csv, save)
    };
    let (log, csv, save) = run("plain", &[]);
    let (log_e, csv_e, save_e) = run("estimated", &["--eval-every", "200"]);
    assert_same_checkpoint(&save, &save_e, "with --eval-every");
    let (estimates, rest): (Vec<&str>, Vec<&str>) =
        log_e.lines().partition(|l| l.starts_with("estimate "));
    assert_eq!(rest.join("\n"), log);
    assert_eq!(
        estimates.len(),
        4,
        "after 0, 200, 400 and 600 steps:\n{log_e}"
    );
    let first_three = |line: &str| line.splitn(4, ',').take(3).collect::<Vec<_>>().join(",");
    let cut: Vec<String> = csv_e.lines().map(first_three).collect();
    assert_eq!(cut, csv.lines().collect::<Vec<_>>());
    let estimated: Vec<&str> = csv_e.lines().filter(|l| !l.ends_with(",,")).collect();
    assert_eq!(estimated.len(), 1 + 3, "the header and steps 0, 200, 400");
    assert!(estimated[0].ends_with(",train_estimate,heldout_estimate"));
    for (line, step) in estimated[1..].iter().zip(["0,", "200,", "400,"]) {
        assert!(line.starts_with(step), "{line}");
        let held_out: f64 = line.rsplit(',').next().unwrap().parse().unwrap();
        assert!(held_out > 2.0 && held_out < 4.5, "{line}");
    }
}

#[test]
fn training_no_steps_says_so() {
    let out = ok(&["train", "--max-steps", "0", "--quiet"]);
    assert!(out.contains("trained no steps"), "{out}");
}

#[test]
fn train_logs_in_the_nanogpt_form() {
    let out = ok(&["train", "--max-steps", "25", "--log-every", "10", "--quiet"]);
    let steps: Vec<&str> = out.lines().filter(|l| l.starts_with("step ")).collect();
    assert_eq!(steps.len(), 4, "steps 0, 10, 20 and the last, 24:\n{out}");
    assert!(
        steps[0].starts_with("step 0: loss 4.1720, lr 1.0e-5, "),
        "{}",
        steps[0]
    );
    assert!(steps[0].ends_with(" ms/step"), "{}", steps[0]);
}

// ---------------------------------------------------------------------------------------------------
// Bad input: one line that names the problem and the fix.
// ---------------------------------------------------------------------------------------------------

#[test]
fn bad_settings_are_named_with_their_fix() {
    for (args, expect) in [
        (
            &["--batch-size", "0"][..],
            "--batch-size 0 is out of range; use 1 to 1024",
        ),
        (
            &["train", "--context-size", "100000"],
            "--context-size 100000",
        ),
        (&["train", "--embedding-size", "0"], "--embedding-size 0"),
        (&["train", "--blocks", "0"], "--blocks 0"),
        (&["train", "--blocks", "1000"], "use 1 to 64"),
        (&["train", "--epochs", "0"], "--epochs 0"),
        (
            &["train", "--threads", "100000"],
            "use 0 (one per core) to 256",
        ),
        (
            &["train", "--lr", "0"],
            "--lr must be a positive number, got 0",
        ),
        (&["train", "--lr", "-1"], "got -1"),
        (&["train", "--lr", "NaN"], "got NaN"),
        (
            &["train", "--heads", "3"],
            "--heads: d_out (64) is not divisible by num_heads (3)",
        ),
        (
            &["--heads", "0"],
            "--heads 0 is out of range; use 1 to 1024",
        ),
        (&["train", "--dropout", "1"], "--dropout 1 is out of range"),
        (&["--dropout", "-0.5"], "--dropout -0.5 is out of range"),
        (&["--mask-value", "NaN"], "--mask-value NaN is not a score"),
        (&["--prompt", ""], "the prompt is empty"),
        (&["--prompt", "ROMEO¿é¿"], "'¿', 'é'"),
        (&["--data", "no/such/file.txt"], "data/fetch.sh"),
        (
            &["train", "--plot", "no/such/folder/x.svg"],
            "no/such/folder does not exist",
        ),
        (
            &["--loss-csv", "no/such/folder/x.csv"],
            "no/such/folder does not exist",
        ),
    ] {
        let msg = fails(args);
        assert!(msg.contains(expect), "{args:?}: {msg}");
    }
}

/// The mistakes the book shows, each with what `s5_gpt` prints on stderr. Each runs as a real program in a
/// folder that holds a checkpoint `runs/tiny`, so that the paths it names are the ones a reader types.
#[test]
fn the_errors_the_book_shows() {
    run_if_child();
    let folder = scratch("book_errors");
    let tiny = folder.join("runs/tiny");
    train_into(&tiny, 3);
    let test = "the_errors_the_book_shows";
    let mut shown = vec![];
    let mut show = |args: &[&str]| {
        let shell: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
        let error = s5_gpt_fails(test, &folder, args);
        shown.push(format!("$ s5_gpt {}\n{error}", shell.join(" ")));
    };
    show(&["generate", "--checkpoint", "runs/tiny", "--prompt", "¿Qué?"]);
    show(&["train", "--context-size", "100000"]);
    show(&["train", "--heads", "3"]);
    show(&["train", "--lr", "1e30"]);
    show(&["train", "--save", "runs/tiny"]);
    show(&["train", "--resume", "runs/tiny", "--blocks", "3"]);
    show(&["train", "--resume", "runs/tiny", "--residual"]);
    let model = bytes(&tiny, MODEL_FILE);
    std::fs::write(tiny.join(MODEL_FILE), &model[..model.len() / 2]).unwrap();
    show(&["eval", "--checkpoint", "runs/tiny"]);
    insta::assert_snapshot!("errors", shown.join("\n\n"));
}

/// `arg` as a shell reads it: quoted when it holds anything but letters, digits and `-./_=`.
fn shell_word(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-./_=".contains(c);
    if arg.chars().all(plain) {
        arg.to_string()
    } else {
        format!("\"{arg}\"")
    }
}

/// Runs `s5_gpt ARGS…` as a program in `dir`, checks that it fails with status 1 and one line on stderr,
/// and returns that line.
fn s5_gpt_fails(test: &str, dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD_ARGS, args.join("\n"))
        .current_dir(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    stderr.trim_end().to_string()
}

#[test]
fn a_diverging_run_stops_at_the_step_it_diverged() {
    let dir = scratch("diverge");
    let args = ["train", "--lr", "1e30", "--max-steps", "50", "--quiet"];
    let msg = fails(&[&args[..], &["--save", path(&dir)]].concat());
    assert!(msg.contains("the loss became NaN at step 1"), "{msg}");
    assert!(msg.contains("lower --lr (it is 1e30)"), "{msg}");
    assert!(
        !dir.join(MODEL_FILE).exists(),
        "a diverged model is not saved"
    );
}

#[test]
fn a_damaged_checkpoint_is_named() {
    let good = scratch("good");
    train_into(&good, 5);
    let damaged = |name: &str, damage: &dyn Fn(&Path)| {
        let dir = scratch(name);
        for file in [MODEL_FILE, OPTIMIZER_FILE, "config.json"] {
            std::fs::copy(good.join(file), dir.join(file)).unwrap();
        }
        damage(&dir);
        let eval = fails(&["eval", "--checkpoint", path(&dir)]);
        let generate = fails(&["generate", "--checkpoint", path(&dir)]);
        assert_eq!(eval, generate);
        eval
    };
    let truncated = damaged("truncated", &|dir| {
        let model = bytes(dir, MODEL_FILE);
        std::fs::write(dir.join(MODEL_FILE), &model[..model.len() / 2]).unwrap();
    });
    assert!(
        truncated.contains("not a complete safetensors file"),
        "{truncated}"
    );
    let corrupt = damaged("corrupt", &|dir| {
        let mut model = bytes(dir, MODEL_FILE);
        let last = model.len() - 1;
        model[last] ^= 0x40;
        std::fs::write(dir.join(MODEL_FILE), model).unwrap();
    });
    assert!(
        corrupt.contains("sha256") && corrupt.contains("corrupt"),
        "{corrupt}"
    );
    let missing = damaged("missing", &|dir| {
        std::fs::remove_file(dir.join(MODEL_FILE)).unwrap();
    });
    assert!(
        missing.contains("model.safetensors") && missing.contains("missing"),
        "{missing}"
    );
    let other_size = damaged("other_size", &|dir| {
        let config = std::fs::read_to_string(dir.join("config.json")).unwrap();
        let config = config.replace("\"blocks\": 2", "\"blocks\": 3");
        std::fs::write(dir.join("config.json"), config).unwrap();
    });
    assert!(
        other_size.contains("does not match the saved tensors"),
        "{other_size}"
    );
    let not_json = damaged("not_json", &|dir| {
        std::fs::write(dir.join("config.json"), "{\"format\": ").unwrap();
    });
    assert!(not_json.contains("config.json") && not_json.contains("not a checkpoint config"));

    let nowhere = fails(&["eval", "--checkpoint", "no/such/run"]);
    assert!(nowhere.contains("train --save no/such/run"), "{nowhere}");
}

#[test]
fn a_checkpoint_refuses_another_text_or_model() {
    let dir = scratch("vocab");
    train_into(&dir, 3);
    let text = std::fs::read_to_string(default_data_path()).unwrap();
    let other = dir.join("shouting.txt");
    std::fs::write(&other, text.to_uppercase()).unwrap();
    let msg = fails(&["eval", "--checkpoint", path(&dir), "--data", path(&other)]);
    assert!(
        msg.contains("39 symbols") && msg.contains("65 symbols"),
        "{msg}"
    );
    let msg = fails(&["train", "--resume", path(&dir), "--data", path(&other)]);
    assert!(msg.contains("pass that text with --data"), "{msg}");

    let msg = fails(&["train", "--resume", path(&dir), "--blocks", "3"]);
    assert!(
        msg.contains("--blocks 3 differs from the checkpoint's 2"),
        "{msg}"
    );
    let msg = fails(&["generate", "--checkpoint", path(&dir), "--prompt", "Zoë"]);
    assert!(msg.contains("'ë'"), "{msg}");
    let msg = fails(&["generate", "--checkpoint", path(&dir), "--temperature", "0"]);
    assert!(
        msg.contains("--temperature must be a number from 0.001 to 1000"),
        "{msg}"
    );
    // Giving a flag its saved value is fine.
    let args = [
        "train",
        "--resume",
        path(&dir),
        "--blocks",
        "2",
        "--max-steps",
        "4",
    ];
    ok(&[&args[..], &["--quiet"]].concat());
}

#[test]
fn only_a_changed_corpus_is_warned_about() {
    assert_eq!(corpus_warning(&default_data_path()), None);
    let dir = scratch("corpus");
    let edited = dir.join("tinyshakespeare.txt");
    std::fs::write(&edited, "To be, or not to be").unwrap();
    let warning = corpus_warning(&edited).expect("an edited corpus is warned about");
    assert!(warning.starts_with("warning:") && warning.contains("data/fetch.sh"));
    assert!(!warning.contains('\n'));
}

#[test]
fn every_flag_explains_itself() {
    let cli = Cli::command();
    let commands = std::iter::once(&cli).chain(cli.get_subcommands());
    for command in commands {
        for arg in command.get_arguments() {
            let id = arg.get_id();
            assert!(
                arg.get_help().is_some(),
                "{} --{id} has no help",
                command.get_name()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Ctrl-C, for real: SIGINT to a process running `s5_gpt`.
// ---------------------------------------------------------------------------------------------------

/// Set in a child process of this test binary: the `s5_gpt` arguments it runs, one per line.
const CHILD_ARGS: &str = "S5_CLI_CHILD_ARGS";

/// Starts `s5_gpt ARGS…` in a new process: this test binary again, running [`command::main`] in place of
/// the test. Its stdout is piped to us.
fn spawn_s5_gpt(test: &str, args: &[&str]) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD_ARGS, args.join("\n"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// In the child process, runs `s5_gpt` and exits with its status instead of returning to the test.
fn run_if_child() {
    if let Ok(args) = std::env::var(CHILD_ARGS) {
        let argv = std::iter::once("s5_gpt").chain(args.lines());
        std::process::exit(command::main(argv.map(Into::into)).into());
    }
}

#[cfg(unix)]
#[test]
fn ctrl_c_saves_a_checkpoint_that_resumes_bit_identically() {
    use std::io::{BufRead, BufReader};
    run_if_child();

    let (whole, parts) = (scratch("ctrl_c_whole"), scratch("ctrl_c_parts"));
    train_into(&whole, 400);

    let args = ["train", "--save", path(&parts), "--max-steps", "400"];
    let test = "ctrl_c_saves_a_checkpoint_that_resumes_bit_identically";
    let mut child = spawn_s5_gpt(
        test,
        &[&args[..], &["--log-every", "20", "--quiet"]].concat(),
    );
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = vec![];
    for line in lines.by_ref() {
        let line = line.unwrap();
        let started = line.starts_with("step 20:");
        printed.push(line);
        if started {
            let pid = child.id().to_string();
            let kill = std::process::Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .unwrap();
            assert!(kill.success());
            break;
        }
    }
    printed.extend(lines.map(Result::unwrap));
    let status = child.wait().unwrap();
    let printed = printed.join("\n");
    assert_eq!(
        status.code(),
        Some(command::INTERRUPTED.into()),
        "{printed}"
    );
    assert!(printed.contains("interrupted after step"), "{printed}");
    assert!(
        printed.contains("continue with: s5_gpt train --resume"),
        "{printed}"
    );
    let stopped_at = checkpoint::load(&parts).unwrap().config.step;
    assert!(
        (21..400).contains(&stopped_at),
        "stopped after step {stopped_at}"
    );

    resume_to(&parts, 400);
    assert_same_checkpoint(&whole, &parts, "after Ctrl-C and resume");
}

// ---------------------------------------------------------------------------------------------------
// A checkpoint written by an earlier build of the crate.
// ---------------------------------------------------------------------------------------------------

/// `tests/fixtures/checkpoint_v1.expected`: what the crate prints for the fixture, by `## ` section.
fn fixture_expectations() -> Vec<String> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/checkpoint_v1.expected");
    let text = std::fs::read_to_string(file).unwrap();
    text.split("\n## ")
        .skip(1)
        .map(|s| s.split_once('\n').unwrap().1.to_string())
        .collect()
}

#[test]
fn a_checkpoint_saved_before_the_two_layers_still_loads() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/checkpoint_v1");
    let [eval, sample, resumed] = <[String; 3]>::try_from(fixture_expectations()).unwrap();
    assert_eq!(
        ok(&["eval", "--checkpoint", path(&fixture), "--quiet"]).trim_end(),
        eval
    );
    let generate = [
        "generate",
        "--checkpoint",
        path(&fixture),
        "--sample-len",
        "40",
    ];
    assert_eq!(ok(&generate).trim_end(), sample);

    let copy = scratch("fixture_resumed");
    for file in [MODEL_FILE, OPTIMIZER_FILE, "config.json"] {
        std::fs::copy(fixture.join(file), copy.join(file)).unwrap();
    }
    resume_to(&copy, 40);
    for line in resumed.lines() {
        let (sha, file) = line.split_once("  ").unwrap();
        let got = attention_from_scratch::s5_gpt::app::files::sha256_hex(&bytes(&copy, file));
        assert_eq!(got, sha, "{file} after resuming to step 40");
    }
}
