//! One line of a bench record, `key=value …`, as the chapters' tables and charts read it.

use std::collections::BTreeMap;

/// A record's line, its words by key.
pub(super) struct Line<'a> {
    text: &'a str,
    pairs: BTreeMap<&'a str, &'a str>,
    /// What the error messages call the record: "bench", "rolling".
    record: &'static str,
}

impl<'a> Line<'a> {
    /// Splits `text` into its `key=value` words, or names the word without `=`.
    pub fn parse(record: &'static str, text: &'a str) -> Result<Self, String> {
        let mut line = Line {
            text,
            pairs: BTreeMap::new(),
            record,
        };
        for pair in text.split_whitespace() {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| line.bad("has a word without ="))?;
            line.pairs.insert(key, value);
        }
        Ok(line)
    }

    /// The message for this line: the record, the line, then `why`.
    pub fn bad(&self, why: &str) -> String {
        format!("the {} record's line {:?} {why}", self.record, self.text)
    }

    /// The value of `key`.
    pub fn word(&self, key: &str) -> Result<&'a str, String> {
        let value = self.pairs.get(key).copied();
        value.ok_or_else(|| self.bad(&format!("has no {key}=")))
    }

    /// The value of `key`, a count.
    pub fn count(&self, key: &str) -> Result<usize, String> {
        let value = self.word(key)?.parse::<usize>();
        value.map_err(|_| self.bad(&format!("has a {key} that is no count")))
    }

    /// The value of `key`, a positive number of milliseconds.
    pub fn ms(&self, key: &str) -> Result<f64, String> {
        let ms = self.word(key)?.parse::<f64>().ok();
        let ms = ms.filter(|ms| ms.is_finite() && *ms > 0.0);
        ms.ok_or_else(|| self.bad(&format!("has an {key} that is no positive number")))
    }
}
