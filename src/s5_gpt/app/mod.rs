//! The tool layer: what stage 5 does around the chapter's code, such as fetching its corpus.

pub mod fetch;
