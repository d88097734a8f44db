//! Tool layer. The download of Tiny Shakespeare: the corpus fetches itself the first time stage 5
//! needs it.
//!
//! [`fetch`] does what `data/fetch.sh` does. It streams the file into `NAME.part` beside the
//! destination, hashing the bytes as they arrive, and renames it into place only once its sha256 is
//! the expected one. Any failure removes the partial file, so the destination is afterwards either
//! the right file or exactly what it was before.
//!
//! [`corpus_url`] honours `TINY_SHAKESPEARE_URL`, for a mirror or for a test's local server.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sha2::{Digest, Sha256};

/// Where `data/fetch.sh` downloads the corpus from: the data folder of Karpathy's char-rnn.
pub const DEFAULT_URL: &str =
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt";

/// The environment variable that replaces [`DEFAULT_URL`].
pub const URL_VAR: &str = "TINY_SHAKESPEARE_URL";

/// The corpus is 1,115,394 bytes; a server that sends more than this is not sending it, and must
/// not be allowed to fill the disk.
const MAX_BYTES: u64 = 16 << 20;

/// How long to wait for a host name to resolve, and then for the connection (with TLS) to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the server may stay silent, in the middle of a transfer or before its answer.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The whole download at most: 1.1 MB at under 2 kB/s is not worth waiting for.
const TOTAL_TIMEOUT: Duration = Duration::from_secs(600);

/// What every message ends with: how to go on without this download.
const WAY_OUT: &str =
    "set TINY_SHAKESPEARE_URL to a mirror, run data/fetch.sh, or pass --data PATH";

/// Why a download failed. Each message is one line: the URL, what went wrong, and the way out.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No answer at all: no network, an unknown host, a refused connection, a timeout, a bad URL.
    #[error("cannot download {url}: {reason}; {}", WAY_OUT)]
    Unreachable { url: String, reason: String },

    /// The server answered with an error status, such as 404.
    #[error(
        "cannot download {url}: the server answered HTTP {status}; {}",
        WAY_OUT
    )]
    Status { url: String, status: u16 },

    /// The transfer broke off: a read error, or fewer bytes than the server announced.
    #[error(
        "the download of {url} broke off after {received} bytes ({reason}); try again, or {}",
        WAY_OUT
    )]
    Interrupted {
        url: String,
        received: u64,
        reason: String,
    },

    /// The server kept sending far more than the corpus.
    #[error(
        "{url} sent more than {limit} bytes, which is not Tiny Shakespeare; {}",
        WAY_OUT
    )]
    TooLarge { url: String, limit: u64 },

    /// The bytes arrived, but they are not the expected file.
    #[error(
        "the file from {url} has sha256 {}…, not the expected {}…; {}",
        short(got),
        short(expected),
        WAY_OUT
    )]
    Checksum {
        url: String,
        expected: String,
        got: String,
    },

    /// The file (or its folder) could not be written.
    #[error(
        "cannot write {} while downloading {url}: {source}; check the folder's permissions and free space, run data/fetch.sh, or pass --data PATH",
        crate::s5_gpt::error::shown(path)
    )]
    Write {
        url: String,
        path: PathBuf,
        source: io::Error,
    },
}

/// The URL to download from: `TINY_SHAKESPEARE_URL` if it is set and not blank, else
/// [`DEFAULT_URL`].
pub fn corpus_url() -> String {
    url_or_default(std::env::var(URL_VAR).ok())
}

/// The choice [`corpus_url`] makes, given the variable's value.
fn url_or_default(var: Option<String>) -> String {
    var.map(|url| url.trim().to_string())
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_URL.to_string())
}

/// Downloads `url` to `dest` and checks that its sha256 is `sha256` (hex), with a byte counter on
/// stderr if `progress` (and stderr is a terminal).
///
/// `dest`'s folder is created if needed. On any error nothing is left behind: no partial file, and
/// `dest` as it was.
pub fn fetch(url: &str, dest: &Path, sha256: &str, progress: bool) -> Result<(), FetchError> {
    eprintln!(
        "downloading Tiny Shakespeare from {url} to {} (1.1 MB, once)",
        crate::s5_gpt::error::shown(dest)
    );
    let part = part_path(dest);
    let fetched = download(url, dest, &part, sha256, progress);
    if fetched.is_err() {
        let _ = fs::remove_file(&part); // it may never have been made
    }
    fetched
}

/// `dest` with `.part` added to its name: where the bytes go until they are checked.
fn part_path(dest: &Path) -> PathBuf {
    let mut name = dest.as_os_str().to_owned();
    name.push(".part");
    PathBuf::from(name)
}

/// The steps of [`fetch`], which cleans up after them.
fn download(
    url: &str,
    dest: &Path,
    part: &Path,
    sha256: &str,
    progress: bool,
) -> Result<(), FetchError> {
    // Ask first, so that a failed request leaves not even an empty folder.
    let body = agent()
        .get(url)
        .call()
        .map_err(|e| request_error(url, e))?
        .into_body();
    if let Some(dir) = dest.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(cannot_write(url, dir))?;
    }
    let mut file = File::create(part).map_err(cannot_write(url, part))?;
    let got = copy_body(url, body, &mut file, part, progress)?;
    file.sync_all().map_err(cannot_write(url, part))?;
    drop(file);
    if !got.eq_ignore_ascii_case(sha256) {
        return Err(FetchError::Checksum {
            url: url.to_string(),
            expected: sha256.to_string(),
            got,
        });
    }
    fs::rename(part, dest).map_err(cannot_write(url, dest))
}

/// An HTTP client that gives up on a dead or stalled server instead of waiting forever.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_resolve(Some(CONNECT_TIMEOUT))
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_per_read(Some(STALL_TIMEOUT))
        .timeout_global(Some(TOTAL_TIMEOUT))
        .build()
        .new_agent()
}

/// Streams the body into `file`, hashing and counting as it goes; returns the sha256 in hex.
fn copy_body(
    url: &str,
    body: ureq::Body,
    file: &mut File,
    part: &Path,
    progress: bool,
) -> Result<String, FetchError> {
    let announced = body.content_length();
    let bar = byte_bar(announced, progress);
    let mut reader = body.into_with_config().limit(MAX_BYTES).reader();
    let mut hasher = Sha256::new();
    let mut received = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read_error(url, received, e)),
        };
        hasher.update(&buf[..n]);
        file.write_all(&buf[..n]).map_err(cannot_write(url, part))?;
        received += n as u64;
        bar.set_position(received);
    }
    bar.finish_and_clear();
    check_length(url, received, announced)?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// A body shorter than its `Content-Length` was cut off, whether or not the client noticed.
fn check_length(url: &str, received: u64, announced: Option<u64>) -> Result<(), FetchError> {
    match announced {
        Some(len) if len != received => Err(FetchError::Interrupted {
            url: url.to_string(),
            received,
            reason: format!("the server announced {len}"),
        }),
        _ => Ok(()),
    }
}

/// A byte counter on stderr: a bar when the length is known, a running count when not.
fn byte_bar(len: Option<u64>, visible: bool) -> ProgressBar {
    let target = if visible {
        ProgressDrawTarget::stderr() // indicatif draws nothing when stderr is not a terminal
    } else {
        ProgressDrawTarget::hidden()
    };
    let template = match len {
        Some(_) => "download [{bar:30}] {bytes}/{total_bytes}, {bytes_per_sec}",
        None => "download {bytes}, {bytes_per_sec}",
    };
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    ProgressBar::with_draw_target(len, target).with_style(style)
}

/// The error of a request that got no usable answer.
fn request_error(url: &str, e: ureq::Error) -> FetchError {
    match e {
        ureq::Error::StatusCode(status) => FetchError::Status {
            url: url.to_string(),
            status,
        },
        e => FetchError::Unreachable {
            url: url.to_string(),
            reason: reason(&e),
        },
    }
}

/// The error for a failed write to `path`, ready for `map_err`.
fn cannot_write(url: &str, path: &Path) -> impl FnOnce(io::Error) -> FetchError {
    let (url, path) = (url.to_string(), path.to_path_buf());
    move |source| FetchError::Write { url, path, source }
}

/// The error of a read from the body, after `received` bytes.
fn read_error(url: &str, received: u64, e: io::Error) -> FetchError {
    // ureq hands its own errors to `Read` callers wrapped in an io::Error; this unwraps them.
    match ureq::Error::from(e) {
        ureq::Error::BodyExceedsLimit(limit) => FetchError::TooLarge {
            url: url.to_string(),
            limit,
        },
        e => FetchError::Interrupted {
            url: url.to_string(),
            received,
            reason: reason(&e),
        },
    }
}

/// A client error in a few plain words, on one line.
fn reason(e: &ureq::Error) -> String {
    let text = match e {
        ureq::Error::HostNotFound => "host not found (no network, or a mistyped URL)".to_string(),
        ureq::Error::Timeout(phase) => format!("timed out ({phase})"),
        ureq::Error::BadUri(uri) => format!("not a valid URL ({uri})"),
        ureq::Error::Http(e) => format!("not a valid URL ({e})"),
        ureq::Error::Rustls(e) => format!("the TLS handshake failed ({e})"),
        ureq::Error::Io(io) => match io.kind() {
            io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
            io::ErrorKind::UnexpectedEof => "the connection closed early".to_string(),
            _ => io.to_string(),
        },
        e => e.to_string(),
    };
    text.replace(['\r', '\n'], " ")
}

/// The first 12 characters of a hash, enough to tell two apart in a message.
fn short(hex: &str) -> String {
    hex.chars().take(12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_variable_replaces_the_default_url() {
        let mirror = "http://127.0.0.1:8000/input.txt";
        assert_eq!(url_or_default(Some(mirror.to_string())), mirror);
        assert_eq!(url_or_default(Some(format!(" {mirror}\n"))), mirror);
    }

    #[test]
    fn an_unset_or_blank_variable_gives_the_default_url() {
        assert_eq!(url_or_default(None), DEFAULT_URL);
        assert_eq!(url_or_default(Some(String::new())), DEFAULT_URL);
        assert_eq!(url_or_default(Some("  ".to_string())), DEFAULT_URL);
    }

    #[test]
    fn the_default_url_is_the_one_of_fetch_sh() {
        let script = include_str!("../../../data/fetch.sh");
        assert!(script.contains(&format!("URL=\"{DEFAULT_URL}\"")));
    }

    #[test]
    fn the_partial_file_sits_beside_the_destination() {
        let dest = Path::new("data/tinyshakespeare.txt");
        assert_eq!(part_path(dest), Path::new("data/tinyshakespeare.txt.part"));
    }
}
