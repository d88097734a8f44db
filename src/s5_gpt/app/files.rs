//! Tool layer. Files the tool reads, writes and checks: where the corpus is, files written whole or
//! not at all, sha256 checks, and the lines of the loss CSV.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::data::DATA_FILE;
use crate::s5_gpt::error::shown;

/// The sha256 of the tutorial's file ([`DATA_FILE`]), as `data/fetch.sh` checks it.
pub const DATA_SHA256: &str = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed";

/// Where to look when no path is given: `data/` of the current directory or of this crate, then the
/// workspace's shared copy next to the crate. The first file that exists wins.
pub fn default_data_path() -> PathBuf {
    let crate_root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        PathBuf::from(DATA_FILE),
        crate_root.join(DATA_FILE),
        PathBuf::from("../shared").join(DATA_FILE),
        crate_root.join("../shared").join(DATA_FILE),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .unwrap_or(&candidates[0])
        .clone()
}

/// Writes `path.tmp`, flushes it to disk, and renames it over `path`: a crash or Ctrl-C never
/// leaves half a file, and a failed write leaves the old file, if any, untouched.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = std::fs::File::create(&tmp)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(|source| ToolError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// The first line of the `--loss-csv` file.
pub const LOSS_CSV_HEADER: &str = "step,lr,loss\n";

/// The first line of the `--loss-csv` file with `--eval-every`: two more columns, filled on the
/// rows of the steps an estimate was made at (before that step's update, as `loss` is).
pub const LOSS_CSV_HEADER_ESTIMATES: &str = "step,lr,loss,train_estimate,heldout_estimate\n";

/// The `--loss-csv` line of step `step`: each number as Rust prints it, the shortest text that
/// reads back as the same float.
pub fn loss_csv_line(step: usize, lr: f64, loss: f32) -> String {
    format!("{step},{lr},{loss}\n")
}

/// The sha256 of `bytes` as 64 lowercase hex digits, as `sha256sum` prints it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A warning if the default corpus is not the file `data/fetch.sh` downloads. Training still works
/// on an edited copy, but its numbers will not be the book's. `None` if the file is the expected
/// one, or cannot be read (loading it will then say why).
pub fn corpus_warning(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    (sha256_hex(&bytes) != DATA_SHA256).then(|| {
        format!(
            "warning: {} is not the Tiny Shakespeare of data/fetch.sh (its sha256 differs), so the numbers will not be the book's; run data/fetch.sh for a clean copy",
            shown(path)
        )
    })
}
