//! The probe `sbx doctor` runs as a real sandbox: sbx's own binary (and the
//! shared libraries it needs), packed into an image with `docker import`, so
//! no registry is involved. Inside the sandbox `sbx __probe TARGET...` binds
//! the socket, answers one connection with what the process actually got,
//! and exits.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::docker::argv::SANDBOX_SOCKET;
use crate::error::{Error, HostError, Result};

/// What the probe saw from inside.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The bytes the host sent, returned, proving the channel carries data both ways.
    pub echo: String,
    pub uid: String,
    pub gid: String,
    pub cap_eff: String,
    pub cap_prm: String,
    pub cap_bnd: String,
    pub cap_amb: String,
    pub no_new_privs: String,
    pub seccomp: String,
    pub read_only_root: bool,
    pub tmp_writable: bool,
    pub state_writable: bool,
    pub interfaces: Vec<String>,
    pub routes: Vec<RouteCheck>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteCheck {
    pub target: String,
    pub reached: bool,
    pub detail: String,
}

/// In the sandbox: bind, answer one connection, exit.
pub fn serve(targets: &[String]) -> Result<()> {
    let io = |e| Error::io("probe", e);
    let listener = UnixListener::bind(SANDBOX_SOCKET).map_err(io)?;
    let (mut conn, _) = listener.accept().map_err(io)?;
    let mut request = Vec::new();
    conn.read_to_end(&mut request).map_err(io)?;
    let mut report = observe(targets);
    report.echo = String::from_utf8_lossy(&request).into_owned();
    let body = serde_json::to_vec(&report).map_err(|source| HostError::Json { context: "probe".into(), source })?;
    conn.write_all(&body).map_err(io)?;
    Ok(())
}

/// Read what this process is allowed to do, from the kernel's point of view.
pub fn observe(targets: &[String]) -> Report {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> String {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
            .map(|v| v.split_whitespace().next().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    let writable = |p: &str| {
        let ok = std::fs::write(p, b"probe").is_ok();
        let _ = std::fs::remove_file(p);
        ok
    };
    let dev = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    let interfaces = dev.lines().skip(2).filter_map(|l| l.split(':').next()).map(|s| s.trim().to_string()).collect();
    Report {
        echo: String::new(),
        uid: field("Uid"),
        gid: field("Gid"),
        cap_eff: field("CapEff"),
        cap_prm: field("CapPrm"),
        cap_bnd: field("CapBnd"),
        cap_amb: field("CapAmb"),
        no_new_privs: field("NoNewPrivs"),
        seccomp: field("Seccomp"),
        read_only_root: !writable("/.sbx-probe"),
        tmp_writable: writable("/tmp/.sbx-probe"),
        state_writable: writable("/state/.sbx-probe"),
        interfaces,
        routes: targets.iter().map(|t| dial(t)).collect(),
    }
}

fn dial(target: &str) -> RouteCheck {
    let result = (|| -> Result<String, String> {
        let addrs: Vec<_> = target.to_socket_addrs().map_err(|e| format!("cannot resolve: {e}"))?.collect();
        let mut last = String::from("no address");
        for a in addrs {
            match TcpStream::connect_timeout(&a, Duration::from_secs(3)) {
                Ok(_) => return Ok(format!("connected to {a}")),
                Err(e) => last = format!("{a}: {e}"),
            }
        }
        Err(last)
    })();
    match result {
        Ok(detail) => RouteCheck { target: target.to_string(), reached: true, detail },
        Err(detail) => RouteCheck { target: target.to_string(), reached: false, detail },
    }
}

/// The files of the probe image: the sbx executable at /sbx, the shared
/// objects `ldd` names at their own paths, and an empty 0755 /tmp (as many
/// images have, so the probe also checks that /tmp is writable anyway).
pub fn image_tar(exe: &Path) -> std::io::Result<(Vec<u8>, String)> {
    let mut files: Vec<(PathBuf, PathBuf)> = vec![(PathBuf::from("sbx"), exe.to_path_buf())];
    for lib in shared_objects(exe) {
        files.push((lib.strip_prefix("/").unwrap_or(&lib).to_path_buf(), lib));
    }
    let mut b = tar::Builder::new(Vec::new());
    for dir in ["tmp", "etc", "state"] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        h.set_mtime(0);
        b.append_data(&mut h, dir, std::io::empty())?;
    }
    for (inside, host) in files {
        let data = std::fs::read(&host)?;
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o755);
        h.set_size(data.len() as u64);
        // Fixed metadata, so the same binary gives the same tar and cache key.
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        b.append_data(&mut h, inside, data.as_slice())?;
    }
    let tar = b.into_inner()?;
    let hash: String = Sha256::digest(&tar).iter().take(8).map(|x| format!("{x:02x}")).collect();
    Ok((tar, hash))
}

/// Absolute paths of the shared objects a dynamic executable loads; none
/// for a static one (or where `ldd` is missing, when the image may lack
/// them and the probe says so by failing to start).
fn shared_objects(exe: &Path) -> Vec<PathBuf> {
    let Ok(out) = std::process::Command::new("ldd").arg(exe).output() else { return Vec::new() };
    parse_ldd(&String::from_utf8_lossy(&out.stdout))
}

pub fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_parses() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f8f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f8f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f8f)\n";
        assert_eq!(
            parse_ldd(text),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
    }

    #[test]
    fn image_tar_is_deterministic() {
        let exe = std::env::current_exe().unwrap();
        let (a, ha) = image_tar(&exe).unwrap();
        let (b, hb) = image_tar(&exe).unwrap();
        assert_eq!((a.len(), ha), (b.len(), hb));
        let mut names = Vec::new();
        for e in tar::Archive::new(a.as_slice()).entries().unwrap() {
            names.push(e.unwrap().path().unwrap().display().to_string());
        }
        assert!(names.contains(&"sbx".to_string()) && names.contains(&"tmp".to_string()), "{names:?}");
    }

    #[test]
    fn observe_reads_this_process() {
        let r = observe(&[]);
        assert!(!r.uid.is_empty() && !r.cap_eff.is_empty() && !r.interfaces.is_empty());
    }
}
