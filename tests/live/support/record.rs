//! The opt-in invocation recorder: with `SBX_RECORD_CORPUS=FILE` set, every
//! sbx run through this support module appends one JSON line to FILE (its
//! test, argv, env overrides, stdin, exit code and stdout), the corpus
//! `scripts/compare-binaries --corpus FILE` replays against two builds.
//! Unset, it does nothing.

use std::ffi::OsString;
use std::io::Write;
use std::process::Output;
use std::sync::Mutex;

/// Enough stdin and stdout to replay a test's small inputs and to map the
/// ids its creates printed; a bigger stream is cut and marked so.
const CAP: usize = 64 * 1024;

/// Tests run on parallel threads of one process: one writer at a time keeps
/// each line whole.
static WRITER: Mutex<()> = Mutex::new(());

/// One sbx invocation: `args` as spawned (the world's directory flags
/// included), the env it set or removed, what went to its stdin, and what it did.
pub struct Invocation<'a> {
    pub args: &'a [OsString],
    pub env: &'a [(&'a str, &'a str)],
    pub env_removed: &'a [&'a str],
    pub stdin: &'a [u8],
}

/// Append `inv` and its result `out` (None: killed at a time limit) to the corpus, if one is being recorded.
pub fn record(inv: &Invocation, out: Option<&Output>) {
    let Some(file) = std::env::var_os("SBX_RECORD_CORPUS") else { return };
    let test = std::thread::current().name().unwrap_or("").to_string();
    let line = serde_json::json!({
        "test": test,
        "argv": inv.args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>(),
        "env": inv.env.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(*v))).collect::<serde_json::Map<_, _>>(),
        "env_removed": inv.env_removed,
        "stdin": base64(&inv.stdin[..inv.stdin.len().min(CAP)]),
        "stdin_truncated": inv.stdin.len() > CAP,
        "exit": out.and_then(|o| o.status.code()),
        "stdout": out.map(|o| String::from_utf8_lossy(&o.stdout[..o.stdout.len().min(CAP)]).into_owned()),
    });
    let _one = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&file).expect("open SBX_RECORD_CORPUS");
    writeln!(f, "{line}").expect("append to SBX_RECORD_CORPUS");
}

/// Standard base64 with padding (no crate for ten lines).
fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..4 {
            s.push(if i <= chunk.len() { ABC[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
        }
    }
    s
}

#[test]
fn base64_pads_like_the_standard() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"foob\xff"), "Zm9vYv8=");
}
