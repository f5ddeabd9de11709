//! The gate's control channel: sbx pushes a [`Vault`] (secret values, the
//! certificates the gate shows the sandbox, the roots it verifies upstreams
//! with) into the gate's memory through an abstract unix socket, which
//! exists only in the gate container's network namespace and in no file
//! system. Only a process of the gate's own uid may push (the sandbox runs
//! in another namespace anyway); each push replaces the whole vault at
//! once, after it has been checked and its TLS configurations built. The
//! answer is one line, `ok` or `error: REASON`, and never holds a value.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio_rustls::rustls;

use crate::spec::egress::vault::{Vault, MAX_VAULT};

/// A checked vault with what each terminated connection needs ready.
pub(crate) struct Armed {
    pub vault: Vault,
    /// The server configuration the gate shows the sandbox, per host.
    pub servers: HashMap<String, Arc<rustls::ServerConfig>>,
    /// The client configuration towards upstreams (the vault's roots).
    pub client: Arc<rustls::ClientConfig>,
}

/// The current vault; None until sbx has pushed one.
pub(crate) type VaultRx = watch::Receiver<Option<Arc<Armed>>>;

/// How long a pusher may take to send its vault.
const PUSH_WAIT: Duration = Duration::from_secs(5);

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Check `vault` and build its TLS configurations. The error never holds
/// a value, a placeholder or a key.
pub(crate) fn arm(vault: Vault) -> Result<Armed, String> {
    let token = |s: &str| !s.is_empty() && s.bytes().all(super::head::is_token);
    let clean = |s: &str| !s.is_empty() && !s.bytes().any(|b| b.is_ascii_control());
    for (i, s) in vault.secrets.iter().enumerate() {
        let which = format!("secret {} ({})", i + 1, if token(&s.name) { s.name.as_str() } else { "?" });
        if !token(&s.name) || !token(&s.header) {
            return Err(format!("{which}: the name and the header must be HTTP tokens"));
        }
        const FRAMING: [&str; 8] =
            ["host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "expect"];
        if FRAMING.iter().any(|f| s.header.eq_ignore_ascii_case(f))
            || s.header.to_ascii_lowercase().starts_with("proxy-")
        {
            return Err(format!("{which}: the header {} frames or routes the request: no secret goes there", s.header));
        }
        if !clean(&s.value) || !clean(&s.placeholder) {
            return Err(format!(
                "{which}: the value and the placeholder must be non-empty, without control characters"
            ));
        }
        if s.value.contains(&s.placeholder) || s.placeholder.contains(&s.value) {
            return Err(format!("{which}: the value and the placeholder overlap"));
        }
        if super::head::normalize_host(&s.host).as_deref() != Some(s.host.as_str()) || s.port == 0 {
            return Err(format!("{which}: the host must be a canonical name or address, the port not 0"));
        }
        if vault.secrets[..i].iter().any(|o| o.placeholder == s.placeholder || o.name == s.name && o.host == s.host) {
            return Err(format!("{which}: the name or the placeholder comes twice"));
        }
    }
    let mut servers = HashMap::new();
    for c in &vault.certs {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(c.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("the certificate for {} is not PEM", c.host))?;
        let key = PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes())
            .map_err(|_| format!("the key for {} is not a PEM private key", c.host))?;
        if chain.is_empty() {
            return Err(format!("no certificate for {}", c.host));
        }
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| format!("the certificate for {}: {e}", c.host))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        if servers.insert(c.host.clone(), Arc::new(config)).is_some() {
            return Err(format!("two certificates for {}", c.host));
        }
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(vault.roots_pem.as_bytes()) {
        let cert = cert.map_err(|_| "the roots are not PEM certificates".to_string())?;
        // The machine's store may hold a certificate rustls cannot use:
        // skipped, as every TLS client skips it.
        let _ = roots.add(cert);
    }
    if roots.is_empty() && !vault.certs.is_empty() {
        return Err("the vault holds no root to verify upstreams with".into());
    }
    let mut client = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Armed { vault, servers, client: Arc::new(client) })
}

/// Keep the gate's memory out of reach of core dumps and of `ptrace` by
/// processes of its uid that are not its ancestors.
pub(crate) fn harden() -> std::io::Result<()> {
    nix::sys::prctl::set_dumpable(false).map_err(std::io::Error::from)
}

/// Bind the abstract socket `name`.
pub(crate) fn bind(name: &str) -> std::io::Result<tokio::net::UnixListener> {
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let l = std::os::unix::net::UnixListener::bind_addr(&addr)?;
    l.set_nonblocking(true)?;
    tokio::net::UnixListener::from_std(l)
}

/// Serve pushes forever, one at a time (sbx sends one per change).
pub(crate) async fn listen(listener: tokio::net::UnixListener, tx: watch::Sender<Option<Arc<Armed>>>) {
    let me = nix::unistd::geteuid().as_raw();
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let answer = match s.peer_cred() {
            Ok(c) if c.uid() == me => match tokio::time::timeout(PUSH_WAIT, receive(&mut s)).await {
                Ok(Ok(armed)) => {
                    tx.send_replace(Some(Arc::new(armed)));
                    "ok\n".to_string()
                }
                Ok(Err(e)) => format!("error: {e}\n"),
                Err(_) => format!("error: no complete vault within {}s\n", PUSH_WAIT.as_secs()),
            },
            Ok(c) => format!("error: uid {} may not push to this gate\n", c.uid()),
            Err(e) => format!("error: the pusher's credentials: {e}\n"),
        };
        let _ = tokio::time::timeout(PUSH_WAIT, s.write_all(answer.as_bytes())).await;
    }
}

async fn receive(s: &mut tokio::net::UnixStream) -> Result<Armed, String> {
    let mut bytes = Vec::new();
    s.take(MAX_VAULT as u64 + 1).read_to_end(&mut bytes).await.map_err(|e| format!("reading the vault: {e}"))?;
    arm(parse(&bytes)?)
}

/// The vault in `bytes`; the error says where, never what.
fn parse(bytes: &[u8]) -> Result<Vault, String> {
    if bytes.len() > MAX_VAULT {
        return Err(format!("the vault is over {MAX_VAULT} bytes"));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| format!("the vault is not the JSON sbx writes (line {}, column {})", e.line(), e.column()))
}

/// `sbx __gate-vault`: send stdin to the gate's socket `name`, return its
/// answer (a line). Err: the push did not arrive.
pub fn push(name: &str, input: &mut dyn Read) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    input.take(MAX_VAULT as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > MAX_VAULT {
        return Ok(format!("error: the vault is over {MAX_VAULT} bytes"));
    }
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let mut s = std::os::unix::net::UnixStream::connect_addr(&addr)?;
    s.set_read_timeout(Some(PUSH_WAIT * 2))?;
    s.write_all(&bytes)?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut answer = String::new();
    s.take(4096).read_to_string(&mut answer)?;
    Ok(answer.trim_end().to_string())
}

/// What `sbx __gate-vault` runs: exit 0 only when the gate said ok.
pub fn push_stdin() -> std::io::Result<bool> {
    let answer = push(crate::model::gate::VAULT_SOCKET, &mut std::io::stdin().lock())?;
    println!("{answer}");
    Ok(answer == "ok")
}

#[cfg(test)]
mod tests;
