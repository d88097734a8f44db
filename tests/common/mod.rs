//! What the tests of stages 1–4 share: running a stage into a string, and reading its printed cells back.

// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

pub mod cli;
pub mod gradcheck;

use attention_from_scratch::{BookSeeds, Error};
use ndarray::ArrayView1;

/// A stage's `run`, writing into a buffer.
pub type Run = fn(&mut Vec<u8>, BookSeeds) -> Result<(), Error>;

/// Everything `run` prints with `seeds`, exactly what the stage's example prints.
pub fn printed(run: Run, seeds: BookSeeds) -> String {
    let mut out = Vec::new();
    run(&mut out, seeds).expect("writing to a Vec cannot fail");
    String::from_utf8(out).expect("the output is UTF-8")
}

/// The printed lines of `output` without the stage's own headings, cell labels and blank lines: what the
/// notebook's cells print, in order.
pub fn book_lines(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter(|line| !(line.is_empty() || line.starts_with("## ") || line.starts_with('[')))
        .collect()
}

/// The stage's own lines: each `## …` section heading, and each cell label cut to its tag (`[#2`).
pub fn structure(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter(|line| line.starts_with("## ") || line.starts_with('['))
        .map(|line| line.split(']').next().unwrap())
        .collect()
}

/// Each `[tag] …` label with the lines printed under it, up to the blank line that ends the cell.
pub fn cells(output: &str) -> Vec<(String, String)> {
    let mut cells: Vec<(String, Vec<&str>)> = Vec::new();
    for line in output.lines() {
        if let Some(label) = line.strip_prefix('[') {
            let tag = label.split(']').next().unwrap_or_default();
            cells.push((tag.to_string(), Vec::new()));
        } else if line.starts_with("## ") {
            cells.push((String::new(), Vec::new()));
        } else if let Some((_, lines)) = cells.last_mut() {
            lines.push(line);
        }
    }
    cells
        .into_iter()
        .filter(|(tag, _)| !tag.is_empty())
        .map(|(tag, lines)| (tag, lines.join("\n").trim_end_matches('\n').to_string()))
        .collect()
}

/// The lines of the cell labelled `tag`.
pub fn cell(cells: &[(String, String)], tag: &str) -> String {
    cells.iter().find(|(t, _)| t == tag).expect(tag).1.clone()
}

/// One output block of a chapter: the name of the snapshot that locks it
/// (`tests/snapshots/<stage>__<name>.snap`, named after the Rust code that computes it) and the tags of
/// the printed cells it shows.
pub type Block = (&'static str, &'static [&'static str]);

/// The text of each block: the lines its cells print, without their labels, one blank line between two
/// cells. Panics unless the blocks show every cell of `output` exactly once, in the printed order, so
/// that the chapter's blocks put together are everything the stage prints.
pub fn blocks(output: &str, blocks: &[Block]) -> Vec<(&'static str, String)> {
    let printed = cells(output);
    let printed_tags: Vec<&str> = printed.iter().map(|(tag, _)| tag.as_str()).collect();
    let block_tags: Vec<&str> = blocks
        .iter()
        .flat_map(|(_, tags)| tags.iter().copied())
        .collect();
    assert_eq!(
        block_tags, printed_tags,
        "the blocks show every printed cell once, in order"
    );
    blocks
        .iter()
        .map(|(name, tags)| {
            let texts: Vec<String> = tags.iter().map(|tag| cell(&printed, tag)).collect();
            (*name, texts.join("\n\n"))
        })
        .collect()
}

/// Each value within 5e-5 of the book's 4-decimal one, so it prints as the book prints it.
pub fn assert_close(actual: ArrayView1<f32>, book: &[f32]) {
    assert_eq!(actual.len(), book.len(), "{actual} vs {book:?}");
    for (a, b) in actual.iter().zip(book) {
        assert!((a - b).abs() <= 5e-5, "{actual} vs the book's {book:?}");
    }
}

/// A fresh, empty folder for one test, removed when the test ends (stage 5's tool tests).
pub struct Scratch(pub std::path::PathBuf);

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `Scratch` named after the test file (`suite`) and the test (`name`), unique to this process.
pub fn scratch(suite: &str, name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("{suite}_{}_{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}
