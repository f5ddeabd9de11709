//! `sbx serve`'s flags, validated before anything is bound or created:
//! where to listen (and with which TLS certificate), the API keys, the
//! templates, the create defaults.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::cli::ServeArgs;
use crate::error::{Error, Result};
use crate::model::invalid::Invalid;
use crate::spec::ImageRef;

/// Where `sbx serve` listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Listen {
    /// `HOST:PORT`, or `unix:PATH`. A TCP address that is not loopback
    /// would carry keys and tokens across the network: refused unless the
    /// server speaks TLS (`tls`).
    pub fn parse(s: &str, tls: bool) -> std::result::Result<Self, Invalid> {
        if let Some(p) = s.strip_prefix("unix:") {
            if !p.starts_with('/') {
                return Err(Invalid::new("--listen", s, "a unix socket path must be absolute"));
            }
            return Ok(Listen::Unix(PathBuf::from(p)));
        }
        let addr: SocketAddr = s.parse().map_err(|_| {
            Invalid::new("--listen", s, "it must be HOST:PORT with an IP address, or unix:PATH")
                .hint("e.g. --listen 127.0.0.1:3000 or --listen unix:/run/sbx/serve.sock")
        })?;
        if !addr.ip().is_loopback() && !tls {
            return Err(Invalid::new(
                "--listen",
                s,
                "a non-loopback address would carry API keys and access tokens in the clear",
            )
            .hint("give --tls-cert FILE --tls-key FILE, or listen on 127.0.0.1 (or unix:PATH)"));
        }
        Ok(Listen::Tcp(addr))
    }
}

/// `--template NAME=IMAGE`: NAME as E2B template ids look, IMAGE as `create --image` takes it.
pub fn parse_template(s: &str) -> std::result::Result<(String, ImageRef), Invalid> {
    let (name, image) = s.split_once('=').ok_or_else(|| {
        Invalid::new("--template", s, "it must be NAME=IMAGE").hint("e.g. --template debian=sha256:<64 hex>")
    })?;
    let ok = !name.is_empty()
        && name.len() <= 128
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        return Err(Invalid::new("--template", s, "NAME must be 1-128 of A-Z, a-z, 0-9, '.', '_', '-'"));
    }
    Ok((name.to_string(), ImageRef::parse(image)?))
}

/// Everything `sbx serve` was told, checked.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: Listen,
    pub templates: BTreeMap<String, ImageRef>,
    /// `--api-key-file`, read and checked now; None: the data dir's own key.
    pub keys: Option<Vec<String>>,
    /// serve's own create flags, checked as `sbx create` checks them.
    pub defaults: super::make::Defaults,
}

impl Config {
    /// `docker_host` is `$DOCKER_HOST` (a socket there is refused as a mount, as by `create`).
    pub fn from_args(a: &ServeArgs, docker_host: Option<&str>) -> Result<Self> {
        let listen = Listen::parse(&a.listen, a.tls_cert.is_some())?;
        let mut templates = BTreeMap::new();
        for t in &a.templates {
            let (name, image) = parse_template(t)?;
            if templates.insert(name.clone(), image).is_some() {
                return Err(Invalid::new("--template", t, format!("the name {name:?} is given twice")).into());
            }
        }
        let keys = a.api_key_file.as_deref().map(read_key_file).transpose()?;
        let defaults = super::make::Defaults::new(a.defaults.clone(), a.allow_internet, docker_host)?;
        Ok(Config { listen, templates, keys, defaults })
    }
}

/// The shortest key sbx accepts from a key file: guessable keys are no keys.
const MIN_KEY_LEN: usize = 16;

/// One key a line (blank lines and `#` comments skipped); refused when
/// its group or others may read it, or when it holds no usable key.
pub fn read_key_file(path: &Path) -> Result<Vec<String>> {
    let show = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| Error::io(format!("reading --api-key-file {show}"), e))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(Invalid::new(
            "--api-key-file",
            show.clone(),
            format!("its mode {:o} lets its group or others read the keys", meta.permissions().mode() & 0o777),
        )
        .hint(format!("chmod 600 {show}"))
        .into());
    }
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading --api-key-file {show}"), e))?;
    let mut keys = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if line.len() < MIN_KEY_LEN || !line.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Invalid::new(
                "--api-key-file",
                show,
                format!("a key must be at least {MIN_KEY_LEN} printable characters without spaces"),
            )
            .into());
        }
        keys.push(line.to_string());
    }
    if keys.is_empty() {
        return Err(Invalid::new("--api-key-file", show, "it holds no key").into());
    }
    Ok(keys)
}

/// `DATA/serve`, made 0700: its key, index and lock are serve's alone.
pub fn private_dir(data_dir: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = data_dir.join("serve");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    Ok(dir)
}

/// The data dir's own key (`serve/api-key`, 0600), made at first start;
/// true when it was made now.
pub fn own_key(data_dir: &Path) -> Result<(String, PathBuf, bool)> {
    let dir = private_dir(data_dir)?;
    let path = dir.join("api-key");
    // Twice at most: a concurrent first start may make it between our look and our link.
    for _ in 0..2 {
        if let Some(k) = read_own_key(&path)? {
            return Ok((k, path, false));
        }
        let key = format!("sbx_{}", random_hex(32));
        let tmp = dir.join(format!(".api-key.{}", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
            f.write_all(format!("{key}\n").as_bytes())?;
            f.sync_all()?;
            // A concurrent first start may have won: theirs stays, ours goes.
            std::fs::hard_link(&tmp, &path)
        };
        let made = write();
        let _ = std::fs::remove_file(&tmp);
        match made {
            Ok(()) => return Ok((key, path, true)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(format!("writing {}", path.display()), e)),
        }
    }
    Err(Error::io(format!("reading {}", path.display()), std::io::Error::other("it appeared and vanished twice")))
}

/// The key in `path`, None when there is no file. Never through a link,
/// and only from a regular file of ours that group and others cannot read:
/// anything else there is refused, not used and not replaced.
fn read_own_key(path: &Path) -> Result<Option<String>> {
    use std::io::Read;
    let show = path.display().to_string();
    let refused = |why: String| Error::io(format!("reading {show}"), std::io::Error::other(why));
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NOFOLLOW).open(path);
    let mut f = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(refused("it is a symbolic link; remove it and sbx makes a key of its own".into()))
        }
        Err(e) => return Err(Error::io(format!("reading {show}"), e)),
    };
    let meta = f.metadata().map_err(|e| Error::io(format!("reading {show}"), e))?;
    if !meta.is_file() {
        return Err(refused("it is not a regular file; remove it and sbx makes a new key".into()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        let mode = meta.permissions().mode() & 0o777;
        return Err(refused(format!("its mode {mode:o} lets its group or others read the key (chmod 600 {show})")));
    }
    let mut text = String::new();
    f.read_to_string(&mut text).map_err(|e| Error::io(format!("reading {show}"), e))?;
    match text.lines().map(str::trim).find(|l| l.len() >= MIN_KEY_LEN) {
        Some(k) => Ok(Some(k.to_string())),
        None => Err(refused("it holds no key; remove it and sbx makes a new one".into())),
    }
}

/// `bytes` random bytes as hex, from the OS's generator.
pub fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut b = vec![0u8; bytes];
    rand::rngs::OsRng.fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `--tls-cert` and `--tls-key` read and checked: the server's TLS
/// settings, offering HTTP/2 and HTTP/1.1 (ALPN, as the E2B SDK asks).
/// Every fault here is the caller's to fix, so each is an [`Invalid`].
pub fn tls(cert: &Path, key: &Path) -> Result<std::sync::Arc<tokio_rustls::rustls::ServerConfig>> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    use tokio_rustls::rustls;
    let (cert_s, key_s) = (cert.display().to_string(), key.display().to_string());
    let pem_err = |flag: &'static str, path: &str, e: rustls_pki_types::pem::Error| {
        let why = match e {
            rustls_pki_types::pem::Error::Io(e) => format!("it cannot be read: {e}"),
            rustls_pki_types::pem::Error::NoItemsFound => "it holds no PRIVATE KEY block".to_string(),
            e => format!("it is not valid PEM: {e:?}"),
        };
        Invalid::new(flag, path.to_string(), why)
    };
    let meta = std::fs::metadata(key)
        .map_err(|e| Invalid::new("--tls-key", key_s.clone(), format!("it cannot be read: {e}")))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(Invalid::new(
            "--tls-key",
            key_s.clone(),
            format!("its mode {:o} lets its group or others read the private key", meta.permissions().mode() & 0o777),
        )
        .hint(format!("chmod 600 {key_s}"))
        .into());
    }
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| pem_err("--tls-cert", &cert_s, e))?;
    if chain.is_empty() {
        return Err(Invalid::new("--tls-cert", cert_s, "it holds no CERTIFICATE block")
            .hint("give the server's certificate (then its intermediates) in PEM")
            .into());
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_err("--tls-key", &key_s, e))?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, private))
        .map_err(|e| {
            Invalid::new("--tls-key", key_s, format!("it does not go with --tls-cert {cert_s}: {e}"))
                .hint("give the private key the certificate was issued for")
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(std::sync::Arc::new(config))
}
