//! `--secret NAME@HOST[:PORT][/HEADER]=SOURCE`: a credential the sandbox
//! never holds. The sandbox gets `NAME=<placeholder>`; its gate terminates
//! TLS for HOST and puts the value into HEADER in place of the placeholder.
//! Parsed and checked before any docker call (exit 2); the value itself is
//! read from SOURCE at create (`read`), never taken from a command line.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::rule::{normalize, parse_port};
use super::DEFAULT_PORT;
use crate::model::invalid::Invalid;

/// The header a secret goes into unless the flag names one.
pub const DEFAULT_HEADER: &str = "Authorization";

/// One `--secret`, validated; no value in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretSpec {
    /// The variable the sandbox gets the placeholder in: `[A-Z_][A-Z0-9_]*`.
    pub name: String,
    /// Exactly one DNS name (lower case; never a wildcard or an address).
    pub host: String,
    /// 443 unless given; never 80.
    pub port: u16,
    /// An HTTP token (RFC 9110 `tchar`s), as given.
    pub header: String,
    pub source: SecretSource,
}

/// Where the value is read at create (and by `sbx secret set`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "from", rename_all = "lowercase")]
pub enum SecretSource {
    /// A variable of sbx's own environment.
    Env(String),
    /// A file no one but its owner can read.
    File(PathBuf),
}

impl SecretSource {
    /// `env` or `file`: what `inspect`, `ls` and the API show.
    pub fn kind(&self) -> &'static str {
        match self {
            SecretSource::Env(_) => "env",
            SecretSource::File(_) => "file",
        }
    }
}

/// The variables sbx itself sets in a sandbox with a gate: a secret named
/// like one would replace what points the sandbox's clients at the gate.
const SET_BY_SBX: &[&str] = &["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_DIR"];

/// Headers that frame or route a request: a value there would change what
/// the request is, not who sends it.
const FRAMING_HEADERS: &[&str] =
    &["host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive"];

const WHAT: &str = "--secret";
const ADDRESS: &str = "HOST is an address: a secret's host is a DNS name the gate shows a certificate for";
const SHAPE: &str = "write --secret NAME@HOST[:PORT][/HEADER]=env:VAR or =file:PATH, \
                     e.g. --secret OPENAI_API_KEY@api.openai.com=env:OPENAI_API_KEY";
/// The longest name, header or source path part sbx takes.
const MAX_PART: usize = 256;
/// The largest value a SOURCE may hold (a token, not a file of them).
pub const MAX_VALUE: u64 = 64 << 10;

impl SecretSpec {
    /// One `--secret` value. An error never shows what follows the '='
    /// unless it is a well-formed SOURCE: a value pasted there is a secret.
    pub fn parse(s: &str) -> Result<SecretSpec, Invalid> {
        let Some((left, right)) = s.split_once('=') else {
            return Err(Invalid::new(WHAT, "(not shown)", "it has no '=SOURCE'").hint(SHAPE));
        };
        let source = SecretSource::parse(right);
        let shown = match &source {
            Some(_) => s.to_string(),
            None => format!("{left}=(not shown)"),
        };
        let bad = |reason: String| Invalid::new(WHAT, shown.clone(), reason).hint(SHAPE);
        let Some(source) = source else {
            return Err(bad("SOURCE must be env:VAR or file:PATH: a value on a command line is readable by \
                            every process of this machine (/proc/PID/cmdline) and stays in shell history"
                .into()));
        };
        let (name, target) = left.split_once('@').ok_or_else(|| bad("it has no '@HOST'".into()))?;
        check_name(name).map_err(bad)?;
        let (hostport, header) = match target.split_once('/') {
            Some((h, header)) => (h, header),
            None => (target, DEFAULT_HEADER),
        };
        check_header(header).map_err(bad)?;
        if hostport.starts_with('[') {
            return Err(bad(ADDRESS.into()));
        }
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => {
                let port =
                    parse_port(p).ok_or_else(|| bad(format!("the port {p:?} is not a number from 1 to 65535")))?;
                (h, port)
            }
            None => (hostport, DEFAULT_PORT),
        };
        if port == 80 {
            return Err(bad("port 80 is plain HTTP: a secret's value only ever travels inside TLS the gate \
                            terminated, so its host is reached over TLS (443 unless given)"
                .into()));
        }
        let host = check_host(host).map_err(bad)?;
        Ok(SecretSpec { name: name.to_string(), host, port, header: header.to_string(), source })
    }
}

/// `[A-Z_][A-Z0-9_]*`, not sbx's own (`SBX_*`, the proxy and CA variables).
fn check_name(name: &str) -> Result<(), String> {
    let ok = name.bytes().next().is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && name.len() <= MAX_PART;
    if !ok {
        return Err(format!(
            "the NAME {:?} must be A-Z, 0-9 and '_', not starting with a digit (it becomes a variable)",
            shown(name)
        ));
    }
    if name.starts_with("SBX_") || SET_BY_SBX.contains(&name) || crate::model::paths::CA_BUNDLE_VARS.contains(&name) {
        return Err(format!("{name} is a variable sbx itself sets in the sandbox: name the secret otherwise"));
    }
    Ok(())
}

/// An RFC 9110 token, and not a header that frames or routes the request.
fn check_header(h: &str) -> Result<(), String> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if h.is_empty() || h.len() > MAX_PART || !h.bytes().all(tchar) {
        return Err(format!("the HEADER {:?} is not an HTTP field name (a token, e.g. X-Api-Key)", shown(h)));
    }
    if FRAMING_HEADERS.contains(&h.to_ascii_lowercase().as_str()) {
        return Err(format!("{h} frames or routes the request; a secret goes into a credential header"));
    }
    Ok(())
}

/// Exactly one DNS name, as `--allow` judges one. Never a wildcard (the
/// gate shows a certificate for one name, and a value belongs to one host)
/// nor an address (clients send no SNI for one, and a certificate for an
/// address is what a leaked CA would then be good for).
fn check_host(host: &str) -> Result<String, String> {
    if host.contains('*') {
        return Err("HOST is a wildcard: a secret belongs to exactly one host".into());
    }
    if host.parse::<std::net::IpAddr>().is_ok() {
        return Err(ADDRESS.into());
    }
    normalize(host)
}

impl SecretSource {
    /// `sbx secret set`'s SOURCE; anything else (a literal) is refused
    /// without being shown.
    pub fn parse_flag(s: &str) -> Result<SecretSource, Invalid> {
        SecretSource::parse(s).ok_or_else(|| {
            Invalid::new("SOURCE", "(not shown)", "it must be env:VAR or file:PATH, never the value itself")
                .hint("e.g. sbx secret set ID NAME env:NEW_TOKEN")
        })
    }

    /// `env:VAR` or `file:PATH`; None for anything else (a literal).
    fn parse(s: &str) -> Option<SecretSource> {
        if let Some(var) = s.strip_prefix("env:") {
            let ok = var.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && var.len() <= MAX_PART;
            return ok.then(|| SecretSource::Env(var.to_string()));
        }
        let path = s.strip_prefix("file:")?;
        let ok = !path.is_empty() && path.len() <= 4096 && !path.contains('\0');
        ok.then(|| SecretSource::File(PathBuf::from(path)))
    }

    /// The value, read now: a set, non-empty variable, or a regular file no
    /// one but its owner may read or write, of at most `MAX_VALUE` bytes,
    /// one trailing newline dropped; visible ASCII only, as a header value
    /// must be. `what` names the flag or command in the error, which never
    /// holds the value.
    pub fn read(&self, what: &'static str, name: &str) -> Result<String, Invalid> {
        let (shown, raw) = match self {
            SecretSource::Env(var) => {
                let shown = format!("{name}=env:{var}");
                let v = std::env::var_os(var).unwrap_or_default();
                if v.is_empty() {
                    return Err(Invalid::new(what, shown, format!("the variable {var} is not set or empty"))
                        .hint(format!("export {var} in the environment sbx runs in")));
                }
                (shown, v.into_encoded_bytes())
            }
            SecretSource::File(path) => {
                let shown = format!("{name}=file:{}", path.display());
                (shown.clone(), read_file(path).map_err(|r| Invalid::new(what, shown, r))?)
            }
        };
        let mut raw = raw;
        if raw.last() == Some(&b'\n') {
            raw.pop();
        }
        if raw.is_empty() || !raw.iter().all(|b| (0x21..=0x7e).contains(b)) {
            return Err(Invalid::new(
                what,
                shown,
                "the value is empty or holds a byte that is not visible ASCII (a space, CR, LF, NUL...): \
                 it must fit in an HTTP header",
            ));
        }
        // Visible ASCII is UTF-8.
        Ok(String::from_utf8(raw).unwrap_or_default())
    }
}

/// A regular file (not followed through a symlink), mode `& 0o077 == 0`,
/// at most `MAX_VALUE` bytes.
fn read_file(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("it cannot be opened: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("it cannot be read: {e}"))?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!("its mode is {:04o}: others than its owner may read or change it", meta.mode() & 0o7777));
    }
    let mut buf = Vec::new();
    f.take(MAX_VALUE + 1).read_to_end(&mut buf).map_err(|e| format!("it cannot be read: {e}"))?;
    if buf.len() as u64 > MAX_VALUE {
        return Err(format!("it is larger than {MAX_VALUE} bytes; a secret is one token"));
    }
    Ok(buf)
}

/// At most 40 characters of a part for a message.
fn shown(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
#[path = "secret_tests.rs"]
mod tests;
