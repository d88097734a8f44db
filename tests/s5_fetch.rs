//! The corpus download against a one-request HTTP server on 127.0.0.1: the right bytes land, and every
//! failure (wrong bytes, 404, a cut-off body, a refused connection) leaves no file behind and says so in
//! one line. Nothing leaves the machine.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use attention_from_scratch::s5_gpt::app::fetch::{FetchError, fetch};
use sha2::{Digest, Sha256};

/// A stand-in corpus, long enough to arrive in several reads.
fn corpus() -> Vec<u8> {
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
        .repeat(2000)
        .into_bytes()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An HTTP/1.1 answer that closes the connection after the body. `length` is the announced
/// `Content-Length`, which a test may set larger than the body.
fn answer(status: &str, length: usize, body: &[u8]) -> Vec<u8> {
    let head =
        format!("HTTP/1.1 {status}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n");
    [head.as_bytes(), body].concat()
}

/// Serves `response` to the first request on a fresh port; returns the URL and the server's thread.
fn serve(response: Vec<u8>) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let server = thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            read_request(&mut stream);
            let _ = stream.write_all(&response);
            let _ = stream.shutdown(std::net::Shutdown::Write);
        }
    });
    (format!("http://127.0.0.1:{port}/input.txt"), server)
}

/// Reads the request head, so that closing the socket does not reset the connection under the client.
fn read_request(stream: &mut TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
}

/// A fresh folder under the system's temp dir, removed when the test ends (even by a panic).
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("s5_fetch-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temp folder");
        TempDir(dir)
    }

    /// Where the corpus goes: in a folder that does not exist yet.
    fn dest(&self) -> PathBuf {
        self.0.join("data").join("tinyshakespeare.txt")
    }

    /// Every file under the folder.
    fn files(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        collect_files(&self.0, &mut files);
        files
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, files);
        } else {
            files.push(path);
        }
    }
}

/// The message of a fetch that must fail, checked to be one line naming the URL and the way out.
fn message(result: Result<(), FetchError>, url: &str) -> (FetchError, String) {
    let err = result.expect_err("the fetch must fail");
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(msg.contains(url), "names the URL: {msg}");
    assert!(msg.contains("data/fetch.sh"), "says the way out: {msg}");
    assert!(msg.contains("--data PATH"), "says the way out: {msg}");
    (err, msg)
}

#[test]
fn the_right_bytes_land_and_no_partial_file_is_left() {
    let dir = TempDir::new("right");
    let body = corpus();
    let (url, server) = serve(answer("200 OK", body.len(), &body));
    fetch(&url, &dir.dest(), &sha256_hex(&body), true).expect("the fetch succeeds");
    server.join().expect("the server ends");
    assert_eq!(std::fs::read(dir.dest()).expect("the corpus"), body);
    assert_eq!(dir.files(), vec![dir.dest()]);
}

#[test]
fn wrong_bytes_are_not_kept() {
    let dir = TempDir::new("wrong");
    let body = corpus();
    let (url, server) = serve(answer("200 OK", body.len(), &body));
    let result = fetch(&url, &dir.dest(), &sha256_hex(b"another text"), false);
    server.join().expect("the server ends");
    let (err, msg) = message(result, &url);
    assert!(matches!(err, FetchError::Checksum { .. }), "{msg}");
    assert!(
        msg.contains(&sha256_hex(&body)[..12]),
        "says what came: {msg}"
    );
    assert!(msg.contains(&sha256_hex(b"another text")[..12]), "{msg}");
    assert_eq!(dir.files(), Vec::<PathBuf>::new());
}

#[test]
fn a_404_says_so_and_leaves_nothing() {
    let dir = TempDir::new("404");
    let (url, server) = serve(answer("404 Not Found", 9, b"not found"));
    let result = fetch(&url, &dir.dest(), &sha256_hex(&corpus()), false);
    server.join().expect("the server ends");
    let (err, msg) = message(result, &url);
    assert!(
        matches!(err, FetchError::Status { status: 404, .. }),
        "{msg}"
    );
    assert!(msg.contains("404"), "{msg}");
    assert_eq!(dir.files(), Vec::<PathBuf>::new());
}

#[test]
fn a_body_cut_short_is_not_kept() {
    let dir = TempDir::new("truncated");
    let body = corpus();
    let (url, server) = serve(answer("200 OK", body.len() + 1000, &body));
    let result = fetch(&url, &dir.dest(), &sha256_hex(&body), false);
    server.join().expect("the server ends");
    let (err, msg) = message(result, &url);
    assert!(matches!(err, FetchError::Interrupted { .. }), "{msg}");
    assert_eq!(dir.files(), Vec::<PathBuf>::new());
}

#[test]
fn a_refused_connection_says_so_and_leaves_nothing() {
    let dir = TempDir::new("refused");
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener.local_addr().expect("its address").port()
    }; // the listener is gone: nothing answers on that port now
    let url = format!("http://127.0.0.1:{port}/input.txt");
    let (err, msg) = message(
        fetch(&url, &dir.dest(), &sha256_hex(&corpus()), false),
        &url,
    );
    assert!(matches!(err, FetchError::Unreachable { .. }), "{msg}");
    assert!(msg.contains("refused"), "{msg}");
    assert_eq!(dir.files(), Vec::<PathBuf>::new());
}

#[test]
fn a_failed_fetch_leaves_an_existing_file_alone() {
    let dir = TempDir::new("existing");
    let old = b"the file that was there before".to_vec();
    std::fs::create_dir_all(dir.0.join("data")).expect("a data folder");
    std::fs::write(dir.dest(), &old).expect("the old file");

    let body = corpus();
    let failures = [
        answer("200 OK", body.len(), &body), // the wrong sha256 below
        answer("200 OK", body.len() + 1000, &body), // cut short
        answer("500 Internal Server Error", 0, b""),
    ];
    for response in failures {
        let (url, server) = serve(response);
        let result = fetch(&url, &dir.dest(), &sha256_hex(&old), false);
        server.join().expect("the server ends");
        message(result, &url);
        assert_eq!(std::fs::read(dir.dest()).expect("the old file"), old);
        assert_eq!(dir.files(), vec![dir.dest()]);
    }
}

#[test]
fn a_folder_that_cannot_be_made_is_named() {
    let dir = TempDir::new("unwritable");
    let blocker = dir.0.join("data");
    std::fs::write(&blocker, "a file where the data folder should be").expect("a file");
    let body = corpus();
    let (url, server) = serve(answer("200 OK", body.len(), &body));
    let result = fetch(&url, &dir.dest(), &sha256_hex(&body), false);
    server.join().expect("the server ends");
    let (err, msg) = message(result, &url);
    assert!(matches!(err, FetchError::Write { .. }), "{msg}");
    assert!(msg.contains(&blocker.display().to_string()), "{msg}");
    assert_eq!(dir.files(), vec![blocker]);
}

#[test]
fn a_malformed_url_is_an_error_not_a_panic() {
    let dir = TempDir::new("malformed");
    let url = "not a url";
    let (err, msg) = message(fetch(url, &dir.dest(), &sha256_hex(&corpus()), false), url);
    assert!(matches!(err, FetchError::Unreachable { .. }), "{msg}");
    assert_eq!(dir.files(), Vec::<PathBuf>::new());
}

/// An `https` URL goes through the TLS stack: against a plain-HTTP server the handshake fails, with an
/// error and not a panic.
#[test]
fn an_https_url_speaks_tls() {
    let dir = TempDir::new("tls");
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let server = thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut hello = [0u8; 4096];
            let _ = stream.read(&mut hello); // the TLS client hello, not an HTTP request
            let _ = stream.write_all(&answer("200 OK", 2, b"hi"));
        }
    });
    let url = format!("https://127.0.0.1:{port}/input.txt");
    let result = fetch(&url, &dir.dest(), &sha256_hex(b"hi"), false);
    server.join().expect("the server ends");
    let (err, msg) = message(result, &url);
    assert!(matches!(err, FetchError::Unreachable { .. }), "{msg}");
    assert_eq!(dir.files(), Vec::<PathBuf>::new());
}

// ---------------------------------------------------------------------------------------------------
// The first run: no corpus anywhere, so stage 5 fetches it, checks it, keeps it and trains on it.
// ---------------------------------------------------------------------------------------------------

#[test]
fn a_first_run_fetches_the_corpus_and_trains_on_it() {
    use attention_from_scratch::s5_gpt::app::Config;
    use attention_from_scratch::s5_gpt::app::config::find_or_fetch;
    use attention_from_scratch::s5_gpt::app::files::default_data_path;

    let tiny_shakespeare =
        std::fs::read(default_data_path()).expect("Tiny Shakespeare: run data/fetch.sh");
    let dir = TempDir::new("first_run");
    let nowhere = dir.0.join("no_copy_here.txt");
    let (url, server) = serve(answer("200 OK", tiny_shakespeare.len(), &tiny_shakespeare));
    let corpus = find_or_fetch(&nowhere, &dir.dest(), &url, false).expect("the corpus arrives");
    server.join().expect("the server ends");
    assert_eq!(corpus, dir.dest());
    assert_eq!(
        dir.files(),
        vec![dir.dest()],
        "the corpus, and no partial file"
    );

    // The next run finds it and asks for nothing (an unreachable address would fail).
    assert_eq!(
        find_or_fetch(&corpus, &nowhere, "http://127.0.0.1:9/", false).unwrap(),
        corpus
    );
    let cfg = Config {
        data: Some(corpus),
        max_steps: Some(3),
        ..Config::default()
    };
    let mut trainer = cfg.trainer().expect("the fetched corpus loads");
    trainer
        .train(|_| std::ops::ControlFlow::Continue(()))
        .unwrap();
    assert_eq!(trainer.losses.len(), 3);
}

#[test]
fn a_first_run_that_cannot_fetch_says_so_and_leaves_nothing() {
    use attention_from_scratch::s5_gpt::app::config::find_or_fetch;

    let dir = TempDir::new("first_run_404");
    let (url, server) = serve(answer("404 Not Found", 9, b"not found"));
    let err = find_or_fetch(&dir.0.join("none.txt"), &dir.dest(), &url, false).unwrap_err();
    server.join().expect("the server ends");
    let msg = err.to_string();
    assert!(
        msg.contains("404") && msg.contains(&url) && msg.contains("data/fetch.sh"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(dir.files().is_empty(), "no file is left: {:?}", dir.files());
}
