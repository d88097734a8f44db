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
            if is_snapshot {
                let first = first_output_line(&text);
                if !range.starts_with(&format!("{first}:")) {
                    return Err(format!(
                        "{shown}:{range}: an output block starts at line {first}"
                    ));
                }
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
fn committed_quick_pictures_are_what_the_code_draws() {
    // Both editions' copies: book/src/img/ and book/src/img/zh-CN/.
    let figures = attention_from_scratch::lang::Lang::ALL
        .into_iter()
        .flat_map(|lang| attention_from_scratch::figures::quick_figures(lang).unwrap());
    for figure in figures {
        let committed = attention_from_scratch::figures::committed(&figure.file)
            .unwrap_or_else(|e| panic!("book/src/img/{}: {e}", figure.file));
        assert!(
            committed == figure.svg,
            "book/src/img/{} is stale; run `cargo run --release --example book_figures -- --quick`",
            figure.file
        );
    }
}

/// Every picture under `book/src/img/` is shown by a chapter, and has a Chinese copy, labelled in
/// Chinese, that the catalogue shows in its place: at least 16 of them.
#[test]
fn every_picture_is_shown_in_both_editions() {
    let img = book_src().join("img");
    let mut pictures: Vec<String> = std::fs::read_dir(&img)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".svg"))
        .collect();
    pictures.sort();
    assert!(
        pictures.len() >= 16,
        "{} pictures: {pictures:?}",
        pictures.len()
    );
    let chapters: String = chapters()
        .iter()
        .map(|chapter| std::fs::read_to_string(chapter).unwrap())
        .collect();
    // The catalogue's strings, each on one line.
    let catalogue = std::fs::read_to_string(book_src().join("../po/zh-CN.po"))
        .unwrap()
        .replace("\"\n\"", "");
    let han = |text: &str| text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
    for name in &pictures {
        assert!(
            chapters.contains(&format!("](img/{name})")),
            "no chapter shows {name}"
        );
        let chinese = std::fs::read_to_string(img.join("zh-CN").join(name))
            .unwrap_or_else(|e| panic!("img/zh-CN/{name}: {e}"));
        assert!(han(&chinese), "img/zh-CN/{name} has no Chinese label");
        let shown = format!("](img/zh-CN/{name})");
        assert!(
            catalogue.contains(&shown),
            "the catalogue does not show {shown}"
        );
    }
}

#[test]
fn committed_ablation_tables_and_picture_are_drawn_from_the_record() {
    use attention_from_scratch::figures::ablation::{Record, chapter_tables};
    use attention_from_scratch::figures::{committed, s5_attention_maps};
    use attention_from_scratch::lang::Lang;
    use attention_from_scratch::s5_gpt::app::ablation::LINE;
    let read = |file: &str| fs::read_to_string(book_src().join("generated").join(file)).unwrap();
    let record: Record = serde_json::from_str(&read("ablation.json")).unwrap();
    let maps: Vec<Vec<Vec<f32>>> = serde_json::from_str(&read("ablation_attention.json")).unwrap();
    let stale = "is stale; run `cargo run --release --example ablation -- --render`";
    for lang in Lang::ALL {
        for (file, text) in chapter_tables(lang, &record).unwrap() {
            let path = format!("{}{file}", lang.dir());
            assert!(read(&path) == text, "book/src/generated/{path} {stale}");
        }
        let flags = &record.best().unwrap().variant.flags;
        let figure = s5_attention_maps(lang, flags, &maps, LINE);
        let drawn = committed(&figure.file).unwrap_or_default() == figure.svg;
        assert!(drawn, "book/src/img/{} {stale}", figure.file);
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

/// Places in `text` where a formula opens or closes with one backslash (`\(`): Markdown reads that
/// as an escaped parenthesis, and the formula shows as plain text.
fn lone_delimiters(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    (1..bytes.len())
        .filter(|&i| matches!(bytes[i], b'(' | b')' | b'[' | b']') && bytes[i - 1] == b'\\')
        .filter(|&i| i < 2 || bytes[i - 2] != b'\\')
        .collect()
}

#[test]
fn every_formula_opens_and_closes_with_two_backslashes() {
    assert!(lone_delimiters(r"the logits \\(\ell\\), the row \\[ x \\]").is_empty());
    assert_eq!(lone_delimiters(r"the logits \(\ell\) and \(k\)").len(), 4);
    for chapter in chapters() {
        let text = fs::read_to_string(&chapter).unwrap();
        let lone = lone_delimiters(&text);
        let name = chapter.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            lone.is_empty(),
            "{name}: a formula delimiter with one backslash near byte {}; write \\\\( … \\\\)",
            lone[0]
        );
    }
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

/// The chapters of stages 1–4, which follow chapter 3 of rasbt's *Build a Large Language Model (From
/// Scratch)*.
const CHAPTERS_1_TO_4: [&str; 4] = [
    "s1_simple.md",
    "s2_trainable.md",
    "s3_causal.md",
    "s4_multihead.md",
];

/// Every stage's chapter: each ends with exercises.
const STAGE_CHAPTERS: [&str; 8] = [
    "s1_simple.md",
    "s2_trainable.md",
    "s3_causal.md",
    "s4_multihead.md",
    "s5_gpt.md",
    "s6_flash.md",
    "s7_variants.md",
    "s8_heads.md",
];

/// What a caption's second part may name: a section of rasbt's chapter 3 (`§3.3.1`), one of its
/// exercises, or nothing in the book at all.
fn names_a_source_section(part: &str) -> bool {
    let section = part
        .strip_prefix("§3.")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    section || part.starts_with("Exercise 3.") || part == "not in the book"
}

/// How an output block's caption starts: Markdown, so that it is translated with the rest of the text.
const CAPTION: &str = "Output of `";

/// The lines around a caption, which give it its style (`.output-caption` in book/theme/book.css). The
/// blank lines between them and the caption make the caption a Markdown paragraph, which mdbook-xgettext
/// extracts for the translations; a caption written as one line of HTML would stay in English.
const CAPTION_OPEN: &str = "<div class=\"output-caption\">";
const CAPTION_CLOSE: &str = "</div>";

/// An output block of a chapter: a ```text block that includes a snapshot.
#[derive(Debug)]
struct OutputBlock {
    /// The snapshot's file name, `s3_causal__masked_weights.snap`.
    snapshot: String,
    /// The caption's text: the line between `<div class="output-caption">` and `</div>` just above the
    /// block, or, when the block has no such wrapper, the nearest non-blank line above it.
    caption: String,
    /// Whether the caption is wrapped as above, each line apart from the next by a blank line.
    styled: bool,
    /// The info string of the fenced block just above the caption (`rust,ignore`, `text`), if the line
    /// above the caption closes one.
    after: Option<String>,
}

fn output_blocks(text: &str) -> Vec<OutputBlock> {
    let lines: Vec<&str> = text.lines().collect();
    let above = |n: usize| (0..n).rev().find(|&k| !lines[k].trim().is_empty());
    let mut blocks = Vec::new();
    let mut open: Option<(usize, &str)> = None;
    let mut closed: Vec<(usize, &str)> = Vec::new(); // (closing line, info string)
    for (n, line) in lines.iter().enumerate() {
        if let Some(info) = line.strip_prefix("```") {
            match open.take() {
                Some((_, opened)) => closed.push((n, opened)),
                None => open = Some((n, info)),
            }
            continue;
        }
        let Some((fence, "text")) = open else {
            continue;
        };
        let Some(start) = line.find("tests/snapshots/") else {
            continue;
        };
        let file = &line[start + "tests/snapshots/".len()..];
        let snapshot = file[..file.find(".snap").expect("a snapshot include") + 5].to_string();
        let mut caption_line = above(fence).expect("an output block has a caption");
        let mut top = caption_line;
        let mut styled = false;
        if lines[caption_line].trim() == CAPTION_CLOSE {
            let text = above(caption_line).expect("a caption's text");
            let open = above(text).expect("a caption's opening line");
            // A blank line on each side of each line, and the text one line only.
            let spaced = |a: usize, b: usize| b == a + 2 && lines[a + 1].trim().is_empty();
            styled =
                lines[open] == CAPTION_OPEN && spaced(open, text) && spaced(text, caption_line);
            caption_line = text;
            top = open;
        }
        let after = above(top).and_then(|k| {
            closed
                .iter()
                .find(|(end, _)| *end == k)
                .map(|(_, info)| info.to_string())
        });
        blocks.push(OutputBlock {
            snapshot,
            caption: lines[caption_line].to_string(),
            styled,
            after,
        });
    }
    blocks
}

#[test]
fn chapters_1_to_4_show_each_output_after_its_code_with_a_caption() {
    for name in CHAPTERS_1_TO_4 {
        let text = fs::read_to_string(book_src().join(name)).unwrap();
        let blocks = output_blocks(&text);
        assert!(
            blocks.len() >= 5,
            "{name} shows {} output blocks",
            blocks.len()
        );
        for block in &blocks {
            let what = format!("{name}, {}", block.snapshot);
            assert!(
                block.snapshot.starts_with(&name.replace(".md", "__")),
                "{what}: a chapter shows its own stage's output"
            );
            assert!(
                block.styled,
                "{what}: the caption is one line of Markdown, between `{CAPTION_OPEN}` and \
                 `{CAPTION_CLOSE}`, each on its own line with blank lines between, just above the block"
            );
            assert!(
                block.caption.starts_with(CAPTION),
                "{what}: the caption names the Rust code: {}",
                block.caption
            );
            let section = block.caption.split(" · ").nth(1).unwrap_or_default();
            assert!(
                names_a_source_section(section),
                "{what}: the caption names the book's section (§3.3.1), an exercise (Exercise 3.1) \
                 or says \"not in the book\": {section:?}"
            );
            let after_code = block
                .after
                .as_deref()
                .is_some_and(|info| info.starts_with("rust") || info == "text");
            assert!(
                after_code,
                "{what}: an output block comes right after the code that computes it (or after \
                 another output of that code)"
            );
        }
    }
}

#[test]
fn every_output_snapshot_of_stages_1_to_4_is_in_its_chapter() {
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    for name in CHAPTERS_1_TO_4 {
        let text = fs::read_to_string(book_src().join(name)).unwrap();
        let shown: Vec<String> = output_blocks(&text)
            .into_iter()
            .map(|b| b.snapshot)
            .collect();
        let prefix = name.replace(".md", "__");
        let mut files: Vec<String> = fs::read_dir(&snapshots)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|file| file.starts_with(&prefix) && file.ends_with(".snap"))
            .filter(|file| !file.ends_with("__output.snap"))
            .collect();
        files.sort();
        let mut shown_sorted = shown.clone();
        shown_sorted.sort();
        assert_eq!(
            shown_sorted, files,
            "{name} shows each of its stage's output blocks once"
        );
    }
}

#[test]
fn output_blocks_are_found_with_their_caption_and_code() {
    let text = "```rust,ignore\n{{#include a.rs:x}}\n```\n\n<div class=\"output-caption\">\n\n\
                Output of `x` · §3.3.1\n\n</div>\n\n```text\n\
                {{#include ../../tests/snapshots/s1_simple__x.snap:5:}}\n```\n";
    let blocks = output_blocks(text);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].snapshot, "s1_simple__x.snap");
    assert_eq!(blocks[0].caption, "Output of `x` · §3.3.1");
    assert!(names_a_source_section("§3.3.1"));
    assert!(!names_a_source_section("§3."));
    assert!(!names_a_source_section("1.1 简单注意力机制"));
    assert!(blocks[0].styled);
    assert_eq!(blocks[0].after.as_deref(), Some("rust,ignore"));
    let prose = "```rust\nlet a = 1;\n```\n\nSome prose.\n\n<div class=\"output-caption\">\n\n\
                 Output of `x`\n\n</div>\n\n```text\n\
                 {{#include ../../tests/snapshots/s1_simple__x.snap:5:}}\n```\n";
    assert_eq!(output_blocks(prose)[0].after, None);
    // A caption as one line of HTML is found, but is not styled Markdown (mdbook-xgettext skips it).
    let html = "```rust\nlet a = 1;\n```\n\n<p class=\"output-caption\">Output of <code>x</code></p>\n\n\
                ```text\n{{#include ../../tests/snapshots/s1_simple__x.snap:5:}}\n```\n";
    let blocks = output_blocks(html);
    assert!(!blocks[0].styled);
    assert_eq!(blocks[0].after.as_deref(), Some("rust"));
    // Nor is a wrapper without the blank lines, where the caption's text would be HTML, not Markdown.
    let tight = "```rust\nlet a = 1;\n```\n\n<div class=\"output-caption\">\nOutput of `x`\n</div>\n\n\
                 ```text\n{{#include ../../tests/snapshots/s1_simple__x.snap:5:}}\n```\n";
    assert!(!output_blocks(tight)[0].styled);
}

#[test]
fn included_rust_fits_in_100_columns() {
    let mut long = Vec::new();
    for chapter in chapters() {
        for (what, code) in included_rust(&chapter) {
            for line in code.lines().filter(|line| line.chars().count() > 100) {
                long.push(format!("{what}: {line}"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "lines over 100 columns:\n{}",
        long.join("\n")
    );
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
    // 2.0406 is the tutorial's own published figure (Appendix A derives it from the GPTmini notebook).
    let typed: Vec<&String> = quoted
        .iter()
        .filter(|q| *q != "2.0406" && !computed.contains(q.as_str()))
        .collect();
    assert!(
        typed.is_empty(),
        "s5_beyond.md quotes {typed:?}, which no generated table holds; run the ablation example"
    );
}

/// The text after a chapter's last `## ` heading, if that heading is `## Exercises`.
fn exercises_section(text: &str) -> Option<&str> {
    let mut in_code = false;
    let mut last = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with("## ") {
            last = Some((line.trim_end(), offset + line.len()));
        }
        offset += line.len();
    }
    match last {
        Some(("## Exercises", start)) => Some(&text[start..]),
        _ => None,
    }
}

#[test]
fn every_stage_chapter_ends_with_exercises_whose_solutions_are_folded_crate_code() {
    for name in STAGE_CHAPTERS {
        let text = fs::read_to_string(book_src().join(name)).unwrap();
        let section = exercises_section(&text)
            .unwrap_or_else(|| panic!("{name} ends with a section `## Exercises`"));
        let solutions: Vec<&str> = section
            .split("<details>")
            .skip(1)
            .map(|rest| &rest[..rest.find("</details>").expect("a <details> block closes")])
            .collect();
        assert!(
            solutions.len() >= 2,
            "{name}: two or three exercises, each solution folded in <details>"
        );
        for solution in solutions {
            let code = includes_in(&book_src().join(name), solution);
            let crate_code = code.iter().any(|include| {
                let path = include.path.to_string_lossy();
                path.contains("/src/") && path.ends_with(".rs")
            });
            assert!(
                crate_code,
                "{name}: each folded solution shows the crate's code (an include from src/), \
                 which a test runs:\n{solution}"
            );
        }
    }
}

#[test]
fn the_exercises_section_is_found_only_at_the_end() {
    assert!(exercises_section("# A\n## Exercises\nx\n").is_some());
    assert!(exercises_section("# A\n## Exercises\nx\n## Run it\n").is_none());
    assert!(exercises_section("# A\n## Exercises\n```\n## not a heading\n```\n").is_some());
}

/// Words that point a reader at texts they cannot open: the descriptions the project started from. The
/// random generators' seeds (`--seed`, `torch.manual_seed`) keep their name.
const PRIVATE_SOURCE_WORDS: [&str; 12] = [
    "seed text",
    "seed tutorial",
    "种子文本",
    "第一份种子",
    "第二份种子",
    "000_…",
    "002_…",
    "`000_",
    "`002_",
    "the seed's",
    "second seed",
    "first seed",
];

fn private_source_words(text: &str) -> Vec<&'static str> {
    let lower = text.to_lowercase();
    PRIVATE_SOURCE_WORDS
        .into_iter()
        .filter(|word| lower.contains(&word.to_lowercase()))
        .collect()
}

/// Every file under `dir` whose name ends with one of `extensions`.
fn files_under(dir: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut found = vec![];
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_under(&path, extensions));
        } else if extensions
            .iter()
            .any(|e| path.to_string_lossy().ends_with(e))
        {
            found.push(path);
        }
    }
    found
}

#[test]
fn nothing_a_reader_sees_cites_texts_they_cannot_open() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = files_under(&book_src(), &[".md"]);
    files.extend(files_under(&root.join("book/po"), &[".po"]));
    files.extend(files_under(&root.join("book/theme"), &[".js"]));
    files.extend(files_under(&root.join("src"), &[".rs"]));
    files.extend(files_under(&root.join("examples"), &[".rs"]));
    files.push(root.join("README.md"));
    files.push(root.join("data/README.md"));
    let mut found = vec![];
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let words = private_source_words(line);
            if !words.is_empty() {
                found.push(format!("{}:{}: {words:?}", file.display(), n + 1));
            }
        }
    }
    assert_eq!(
        private_source_words("The Seed Text's test()"),
        ["seed text"]
    );
    assert!(private_source_words("torch.manual_seed(123); --seed 7; 100_000_000").is_empty());
    assert!(
        found.is_empty(),
        "cite the public sources (rasbt's chapter 3, GPTmini's chapter), not:\n{}",
        found.join("\n")
    );
}

/// The Han characters of `text` (CJK ideographs and CJK punctuation).
fn chinese_characters(text: &str) -> usize {
    text.chars()
        .filter(|c| matches!(*c as u32, 0x3000..=0x303F | 0x4E00..=0x9FFF | 0xFF00..=0xFFEF))
        .count()
}

/// A cited title's worth: 《从零构建大模型》, 《从零开始大模型》 and the chapter 因果注意力.
const CITED_TITLES: usize = 24;

#[test]
fn the_english_edition_is_in_english() {
    assert_eq!(chinese_characters("《从零开始大模型》, a title"), 9);
    let mut long = vec![];
    for chapter in chapters() {
        let name = chapter.file_name().unwrap().to_string_lossy().into_owned();
        if name == "glossary.md" {
            continue;
        }
        let mut text = fs::read_to_string(&chapter).unwrap();
        // What the chapter includes is on its page too: the crate's code, outputs and English tables.
        for include in includes(&chapter) {
            text.push_str(&fs::read_to_string(&include.path).unwrap_or_default());
        }
        let count = chinese_characters(&text);
        if count > CITED_TITLES {
            long.push(format!("{name}: {count} Chinese characters"));
        }
    }
    assert!(
        long.is_empty(),
        "the English edition keeps Chinese to the glossary and cited titles:\n{}",
        long.join("\n")
    );
}

/// What a stale generated file says: how to draw it again.
const STALE: &str = "is stale; run `cargo run --release --example book_figures -- --quick`";

/// Each (file under `book/src/generated/`, Markdown) is the committed file, byte for byte.
fn assert_tables_committed(tables: Vec<(String, String)>) {
    for (file, text) in tables {
        let committed = fs::read_to_string(book_src().join("generated").join(&file));
        assert!(
            committed.is_ok_and(|c| c == text),
            "book/src/generated/{file} {STALE}"
        );
    }
}

/// Each figure is the committed picture, byte for byte.
fn assert_figures_committed(figures: Vec<attention_from_scratch::figures::Figure>) {
    use attention_from_scratch::figures::committed;
    for figure in figures {
        let drawn = committed(&figure.file).is_ok_and(|c| c == figure.svg);
        assert!(drawn, "book/src/img/{} {STALE}", figure.file);
    }
}

#[test]
fn committed_cost_tables_are_drawn_from_the_bench_record() {
    use attention_from_scratch::figures::cost::{committed_medians, tables};
    use attention_from_scratch::lang::Lang;
    let medians = committed_medians().unwrap();
    for lang in Lang::ALL {
        assert_tables_committed(tables(lang, &medians));
    }
}

#[test]
fn committed_cache_table_and_chart_are_drawn_from_the_bench_record() {
    use attention_from_scratch::figures::cache::{committed_record, figures, tables};
    use attention_from_scratch::lang::Lang;
    let record = committed_record().unwrap();
    for lang in Lang::ALL {
        assert_tables_committed(tables(lang, &record));
        let charts = figures(lang, &record);
        assert_eq!(charts.len(), 1, "the record draws no chart at one thread");
        assert_figures_committed(charts);
    }
}

#[test]
fn committed_rolling_table_and_chart_are_drawn_from_their_record() {
    use attention_from_scratch::figures::rolling::{self, figures, tables};
    use attention_from_scratch::lang::Lang;
    let record = rolling::committed().unwrap();
    for lang in Lang::ALL {
        assert_tables_committed(tables(lang, &record));
        let charts = figures(lang, &record);
        assert_eq!(charts.len(), 1, "the record draws the rolling chart");
        assert_figures_committed(charts);
    }
}

#[test]
fn committed_peak_table_and_chart_are_drawn_from_their_record() {
    use attention_from_scratch::figures::peak::{committed, figures, tables};
    use attention_from_scratch::lang::Lang;
    let record = committed().unwrap();
    for lang in Lang::ALL {
        assert_tables_committed(tables(lang, &record));
        let charts = figures(lang, &record);
        assert_eq!(charts.len(), 1, "the record draws the chart of shares");
        assert_figures_committed(charts);
    }
}

#[test]
fn committed_study_table_and_pictures_are_drawn_from_their_record() {
    use attention_from_scratch::figures::committed;
    use attention_from_scratch::figures::heads::{self, figures, tables};
    use attention_from_scratch::lang::Lang;
    let record = heads::committed().unwrap();
    assert_eq!(
        record.models.len(),
        7,
        "every model of the study is in the record"
    );
    let stale = "is stale; run `cargo run --release --example book_figures -- --quick`";
    for lang in Lang::ALL {
        for (file, text) in tables(lang, &record) {
            let committed = fs::read_to_string(book_src().join("generated").join(&file));
            assert!(
                committed.is_ok_and(|c| c == text),
                "book/src/generated/{file} {stale}"
            );
        }
        let pictures = figures(lang, &record);
        assert_eq!(
            pictures.len(),
            4,
            "the detectors, the phase change, the losses, the grid"
        );
        for figure in pictures {
            let drawn = committed(&figure.file).is_ok_and(|c| c == figure.svg);
            assert!(drawn, "book/src/img/{} {stale}", figure.file);
        }
    }
}
