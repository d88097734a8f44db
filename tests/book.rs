//! The book is built from the crate: every `{{#include}}` must find non-empty text, and every output block
//! must start at the first line of its snapshot. mdBook itself drops a missing anchor without a word.

use std::fs;
use std::path::{Path, PathBuf};

/// One `{{#include path:selector}}` in a chapter.
struct Include {
    chapter: PathBuf,
    path: PathBuf,
    selector: Option<String>,
}

fn book_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src")
}

fn chapters() -> Vec<PathBuf> {
    let mut chapters: Vec<PathBuf> = fs::read_dir(book_src())
        .expect("book/src exists")
        .map(|entry| entry.expect("book/src is readable").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    chapters
}

fn includes(chapter: &Path) -> Vec<Include> {
    let text = fs::read_to_string(chapter).expect("a chapter is readable");
    includes_in(chapter, &text)
}

/// The includes in `text`, a part of `chapter`.
fn includes_in(chapter: &Path, text: &str) -> Vec<Include> {
    text.match_indices("{{#include ")
        .map(|(start, marker)| {
            let body = &text[start + marker.len()..];
            let body = body[..body.find("}}").expect("an include ends with }}")].trim();
            let (path, selector) = match body.split_once(':') {
                Some((path, selector)) => (path, Some(selector.to_string())),
                None => (body, None),
            };
            Include {
                chapter: chapter.to_path_buf(),
                path: chapter.parent().unwrap().join(path),
                selector,
            }
        })
        .collect()
}

/// The text mdBook would include for `anchor`, or `None` if either marker is missing.
fn anchored<'a>(text: &'a str, anchor: &str) -> Option<&'a str> {
    let start_marker = format!("ANCHOR: {anchor}\n");
    let end_marker = format!("ANCHOR_END: {anchor}");
    let start = text.find(&start_marker)? + start_marker.len();
    let end = start + text[start..].find(&end_marker)?;
    let body = &text[start..end];
    Some(&body[..body.rfind('\n').unwrap_or(0)])
}

/// The 1-based line on which a snapshot's content starts, after insta's `---` header.
fn first_output_line(snapshot: &str) -> usize {
    let mut dashes = snapshot
        .lines()
        .enumerate()
        .filter(|(_, line)| *line == "---");
    dashes
        .nth(1)
        .expect("a snapshot has a header between two --- lines")
        .0
        + 2
}

/// The lines `from:to` (1-based, inclusive, `to` optional) of `text`.
fn line_range(text: &str, range: &str) -> Option<String> {
    let (from, to) = range.split_once(':').unwrap_or((range, range));
    let lines: Vec<&str> = text.lines().collect();
    let from: usize = from.parse().ok()?;
    let to: usize = if to.is_empty() {
        lines.len()
    } else {
        to.parse().ok()?
    };
    Some(
        lines
            .get(from.checked_sub(1)?..to.min(lines.len()))?
            .join("\n"),
    )
}

fn check(include: &Include) -> Result<(), String> {
    let shown = format!(
        "{} includes {}",
        include.chapter.display(),
        include.path.display()
    );
    let text = fs::read_to_string(&include.path).map_err(|e| format!("{shown}: {e}"))?;
    let selected = match include.selector.as_deref() {
        None => text.clone(),
        Some(range) if range.starts_with(|c: char| c.is_ascii_digit()) => {
            let is_snapshot = include.path.extension().is_some_and(|e| e == "snap");
            let first = first_output_line(&text);
            if is_snapshot && !range.starts_with(&format!("{first}:")) {
                return Err(format!(
                    "{shown}:{range}: an output block starts at line {first}"
                ));
            }
            line_range(&text, range).ok_or_else(|| format!("{shown}: bad line range {range}"))?
        }
        Some(anchor) => anchored(&text, anchor)
            .ok_or_else(|| format!("{shown}: no anchor {anchor}"))?
            .to_string(),
    };
    if selected.trim().is_empty() {
        return Err(format!("{shown}: the include is empty"));
    }
    Ok(())
}

#[test]
fn every_include_resolves_to_non_empty_text() {
    let all: Vec<Include> = chapters().iter().flat_map(|c| includes(c)).collect();
    assert!(
        all.len() >= 10,
        "the chapters include the crate's code and outputs"
    );
    let failures: Vec<String> = all.iter().filter_map(|i| check(i).err()).collect();
    assert!(
        failures.is_empty(),
        "broken includes:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_renamed_anchor_is_caught() {
    let text = "// ANCHOR: softmax\nfn softmax() {}\n// ANCHOR_END: softmax\n";
    assert_eq!(anchored(text, "softmax"), Some("fn softmax() {}"));
    assert_eq!(anchored(text, "soft_max"), None);
    assert_eq!(anchored("// ANCHOR: a\n// ANCHOR_END: a\n", "a"), Some(""));
}

#[test]
fn snapshot_output_starts_after_the_header() {
    let snap = "---\nsource: tests/s1_simple.rs\nexpression: output\n---\nfirst line\nsecond\n";
    assert_eq!(first_output_line(snap), 5);
    assert_eq!(
        line_range(snap, "5:").as_deref(),
        Some("first line\nsecond")
    );
}

#[test]
fn every_chapter_is_in_the_summary() {
    let summary = fs::read_to_string(book_src().join("SUMMARY.md")).unwrap();
    for chapter in chapters() {
        let name = chapter.file_name().unwrap().to_str().unwrap();
        let listed = name == "SUMMARY.md" || summary.contains(&format!("({name})"));
        assert!(listed, "{name} is not in SUMMARY.md");
    }
}

#[test]
fn committed_attention_pictures_are_what_the_code_draws() {
    for figure in attention_from_scratch::figures::attention_figures().unwrap() {
        let committed = attention_from_scratch::figures::committed(&figure.file)
            .unwrap_or_else(|e| panic!("book/src/img/{}: {e}", figure.file));
        assert!(
            committed == figure.svg,
            "book/src/img/{} is stale; run `cargo run --release --example book_figures`",
            figure.file
        );
    }
}

/// The `\\[ … \\]` and `\\( … \\)` formulas of `text`.
fn formulas(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for (open, close) in [("\\\\[", "\\\\]"), ("\\\\(", "\\\\)")] {
        let mut rest = text;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len()..];
            let Some(end) = after.find(close) else { break };
            found.push(&after[..end]);
            rest = &after[end + close.len()..];
        }
    }
    found
}

#[test]
fn formulas_are_plain_tex() {
    // mdbook-katex renders each formula before Markdown reads the page, so a formula is TeX as written:
    // `_` is a subscript, and Markdown's escape `\_` would print an underscore.
    let mut escaped = Vec::new();
    for chapter in chapters() {
        let text = fs::read_to_string(&chapter).unwrap();
        if formulas(&text).iter().any(|f| f.contains("\\_")) {
            escaped.push(chapter.file_name().unwrap().to_str().unwrap().to_string());
        }
    }
    assert_eq!(formulas("x \\\\( a_i \\\\) y"), [" a_i "]);
    assert!(
        escaped.is_empty(),
        "write a subscript as _, not \\_, in the formulas of: {}",
        escaped.join(", ")
    );
}

/// What the fast layer's code says of itself; none of it belongs in the lesson the stage-5 chapter shows.
const FAST_WORDS: [&str; 9] = [
    "team::",
    "thread",
    "pool",
    "spare",
    "lanes",
    "LANES",
    "vectorised",
    "timer",
    "unsafe",
];

/// The Rust code a chapter includes: (what, text) for every `{{#include}}` inside a ```rust block.
fn included_rust(chapter: &Path) -> Vec<(String, String)> {
    let text = fs::read_to_string(chapter).unwrap();
    let mut blocks = vec![];
    let mut in_rust = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_rust = line.starts_with("```rust");
        } else if in_rust && line.trim_start().starts_with("{{#include ") {
            let include = includes_in(chapter, line).remove(0);
            let file = fs::read_to_string(&include.path).unwrap();
            let anchor = include.selector.clone().unwrap_or_default();
            let shown = anchored(&file, &anchor).unwrap_or(&file).to_string();
            blocks.push((format!("{}:{anchor}", include.path.display()), shown));
        }
    }
    blocks
}

#[test]
fn the_stage_5_chapters_show_the_lesson_only() {
    for name in ["s5_gpt.md", "s5_beyond.md"] {
        let blocks = included_rust(&book_src().join(name));
        assert!(blocks.len() >= 10, "{name} shows the lesson's code");
        check_lesson_blocks(&blocks);
    }
}

/// Each block is the lesson's code, with no word of the fast layer, and at most 45 lines.
fn check_lesson_blocks(blocks: &[(String, String)]) {
    for (what, code) in blocks {
        let lesson =
            what.contains("src/s5_gpt/") && !what.contains("/fast/") && !what.contains("/app/");
        assert!(lesson, "{what} is not from the lesson layer");
        for word in FAST_WORDS {
            assert!(
                !code.contains(word),
                "{what} shows the fast layer ({word:?})"
            );
        }
        let lines = code.lines().count();
        assert!(
            lines <= 45,
            "{what} is {lines} lines; the book shows at most 45"
        );
    }
}

/// The numbers with four decimals in `text` outside code blocks and includes (losses, as the tables print them).
fn quoted_losses(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut found = vec![];
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code || line.contains("{{#include") {
            continue;
        }
        let bytes = line.as_bytes();
        for (i, _) in line.match_indices('.') {
            let digits = |r: std::ops::Range<usize>| {
                r.clone()
                    .all(|k| bytes.get(k).is_some_and(u8::is_ascii_digit))
            };
            let whole = i > 0 && digits(i - 1..i);
            let four = digits(i + 1..i + 5) && !digits(i + 5..i + 6);
            if whole && four {
                let start = line[..i]
                    .rfind(|c: char| !c.is_ascii_digit())
                    .map_or(0, |k| k + 1);
                found.push(line[start..i + 5].to_string());
            }
        }
    }
    found
}

#[test]
fn the_ablation_chapter_quotes_only_computed_losses() {
    let chapter = fs::read_to_string(book_src().join("s5_beyond.md")).unwrap();
    let mut computed = String::new();
    for include in includes(&book_src().join("s5_beyond.md")) {
        if include.path.extension().is_none_or(|e| e != "rs") {
            computed.push_str(&fs::read_to_string(&include.path).unwrap());
        }
    }
    let quoted = quoted_losses(&chapter);
    assert!(quoted.len() >= 10, "the chapter discusses its figures");
    assert_eq!(
        quoted_losses("loss 2.0408, not 12.34567 or 1.5"),
        ["2.0408"]
    );
    // 2.0406 is the tutorial's own published figure, quoted from the seed text.
    let typed: Vec<&String> = quoted
        .iter()
        .filter(|q| *q != "2.0406" && !computed.contains(q.as_str()))
        .collect();
    assert!(
        typed.is_empty(),
        "s5_beyond.md quotes {typed:?}, which no generated table holds; run the ablation example"
    );
}
