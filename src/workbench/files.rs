//! `sbx cp`, `backup` and `restore`: the docker side of moving files, over
//! the record stream of [`super::transfer`].

use crate::error::{Error, Invalid, Result, TransferError};
use crate::workbench::transfer::{self, Limits, Skipped};

use super::helper::{drain, helper_argv, run_stream, streamed, transfer_failure};
use super::Target;
use crate::model::names::SandboxId;

/// A side of `sbx cp`: a host path, or `ID:/absolute/path`; `S` is the
/// sandbox as parsed (its id), then as opened (a [`Target`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpSide<S = SandboxId> {
    Host(std::path::PathBuf),
    Sandbox {
        id: S,
        path: String,
    },
    /// `-`: a tar stream on stdout (as destination) or stdin (as source),
    /// as `docker cp` takes it.
    Tar,
}

pub fn parse_cp_side(s: &str) -> std::result::Result<CpSide, Invalid> {
    if let Some((id, path)) = s.split_once(':') {
        if id.starts_with("sbx-") {
            let id: SandboxId = id.parse()?;
            if !path.starts_with('/') {
                return Err(Invalid::new(
                    "cp path",
                    s,
                    "the sandbox path must be absolute, e.g. sbx-0123456789ab:/tmp/out",
                ));
            }
            if std::path::Path::new(path).components().any(|c| matches!(c, std::path::Component::ParentDir)) {
                return Err(Invalid::new("cp path", s, "the sandbox path may not contain '..'"));
            }
            return Ok(CpSide::Sandbox { id, path: path.to_string() });
        }
    }
    if s.is_empty() {
        return Err(Invalid::new("cp path", s, "it is empty"));
    }
    if s == "-" {
        return Ok(CpSide::Tar);
    }
    Ok(CpSide::Host(s.into()))
}

/// Copy host -> sandbox or sandbox -> host, streamed both ways. What comes
/// out of the sandbox is hostile: only the named source's own
/// name and what is below it is accepted, within `limits`. Ok: what was
/// left out (fifos, sockets, devices), for a warning.
pub fn cp(src: &CpSide<Target>, dst: &CpSide<Target>, limits: &Limits) -> Result<Skipped> {
    let mut skipped = Skipped::default();
    match (src, dst) {
        (CpSide::Host(from), CpSide::Sandbox { id: t, path }) => {
            let id = &t.sandbox;
            let argv = helper_argv(t, true, &["receive", path]);
            let mut input = |w: &mut dyn std::io::Write| {
                let mut enc = transfer::Encoder::new(std::io::BufWriter::new(w))?;
                transfer::host::send_host(from, &mut enc)?;
                skipped = enc.skipped().clone();
                enc.end().map(drop)
            };
            let mut r = run_stream(t, &argv, Some(&mut input), &mut drain)?;
            match std::mem::replace(&mut r.input, Ok(())) {
                // A host-side failure (missing source...) is the real reason the helper failed.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe || r.status == 0 => {
                    return Err(transfer_failure(format!("reading {}", from.display()), e))
                }
                _ => streamed(t, &argv, r, || format!("copying into {id}:{path}"))?,
            }
        }
        (CpSide::Sandbox { id: t, path }, CpSide::Host(to)) => {
            let id = &t.sandbox;
            let root = transfer::root_name(path).ok_or_else(|| {
                Invalid::new("cp path", format!("{id}:{path}"), "name a file or directory, not the sandbox's /")
            })?;
            let mut w = transfer::host::HostWriter::new(to, &root)
                .map_err(|e| transfer_failure(format!("opening the destination {}", to.display()), e))?;
            let argv = helper_argv(t, false, &["send", path]);
            let mut output = |r: &mut dyn std::io::Read| {
                let mut dec = transfer::Decoder::new(std::io::BufReader::new(r), &root, *limits)?;
                w.write_from(&mut dec)?;
                skipped = dec.skipped().clone();
                Ok(())
            };
            let r = run_stream(t, &argv, None, &mut output)?;
            streamed(t, &argv, r, || format!("copying {id}:{path} to {}", to.display()))?
        }
        (CpSide::Sandbox { id: t, path }, CpSide::Tar) => {
            let id = &t.sandbox;
            let root = transfer::root_name(path).ok_or_else(|| {
                Invalid::new("cp path", format!("{id}:{path}"), "name a file or directory, not the sandbox's /")
            })?;
            let argv = helper_argv(t, false, &["send", path]);
            let mut output = |r: &mut dyn std::io::Read| {
                let mut dec = transfer::Decoder::new(std::io::BufReader::new(r), &root, *limits)?;
                transfer::archive::to_tar_rooted(&mut dec, std::io::BufWriter::new(std::io::stdout().lock()))?;
                skipped = dec.skipped().clone();
                Ok(())
            };
            let r = run_stream(t, &argv, None, &mut output)?;
            streamed(t, &argv, r, || format!("copying {id}:{path} to stdout as tar"))?
        }
        (CpSide::Tar, CpSide::Sandbox { id: t, path }) => {
            send_archive(t, std::io::stdin().lock(), limits, path, false)?
        }
        _ => {
            return Err(Invalid::new(
                "cp",
                "",
                "exactly one side must be a sandbox path (ID:/path) and the other a host path or - (a tar stream)",
            )
            .into())
        }
    }
    Ok(skipped)
}

/// One regular file of the sandbox (never followed if a link): its size
/// handed to `sized` first, then its bytes to `out` as they arrive, holes
/// as zeros, within `limits`; a directory or a link is refused.
pub fn read_file(
    t: &Target,
    path: &str,
    limits: &Limits,
    sized: &mut dyn FnMut(u64) -> std::io::Result<()>,
    out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<u64> {
    let root =
        transfer::root_name(path).ok_or_else(|| Invalid::new("path", path, "name a file, not the sandbox's /"))?;
    let argv = helper_argv(t, false, &["send", path]);
    let mut size = 0;
    let mut output = |r: &mut dyn std::io::Read| {
        let mut dec = transfer::Decoder::new(std::io::BufReader::new(r), &root, *limits)?;
        let rec = dec.next_record()?;
        // A FIFO, socket or device is skipped by the helper, never opened: not a file either.
        let special = rec.is_none() && dec.skipped().count > 0;
        let rec = rec.ok_or_else(|| match special {
            true => transfer::wire::refused(std::io::ErrorKind::InvalidInput, format!("{path} is not a regular file")),
            false => std::io::Error::other("the helper sent nothing"),
        })?;
        let transfer::Kind::File { size: n } = rec.kind else {
            return Err(transfer::wire::refused(
                std::io::ErrorKind::InvalidInput,
                format!("{path} is not a regular file"),
            ));
        };
        size = n;
        sized(n)?;
        let mut bytes = transfer::archive::file_bytes(&mut dec, n);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let got = std::io::Read::read(&mut bytes, &mut buf)?;
            if got == 0 {
                break;
            }
            out(&buf[..got])?;
        }
        drop(bytes);
        while dec.next_record()?.is_some() {}
        Ok(())
    };
    let r = run_stream(t, &argv, None, &mut output)?;
    streamed(t, &argv, r, || format!("reading {}:{path}", t.sandbox))?;
    Ok(size)
}

/// Write `data` as the regular file `path` in the sandbox (made, or
/// replaced; a link there is replaced, never followed), mode 0644, its
/// parent directories made first, through the record stream `sbx cp`
/// sends.
pub fn write_file(t: &Target, path: &str, data: &[u8]) -> Result<()> {
    let root =
        transfer::root_name(path).ok_or_else(|| Invalid::new("path", path, "name a file, not the sandbox's /"))?;
    if let Some(parent) = std::path::Path::new(path).parent().and_then(|p| p.to_str()).filter(|p| *p != "/") {
        super::listing::mkdir(t, parent, true)?;
    }
    let argv = helper_argv(t, true, &["receive", path]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let mut input = |w: &mut dyn std::io::Write| {
        let mut enc = transfer::Encoder::new(std::io::BufWriter::new(w))?;
        enc.file(root.as_bytes(), 0o644, now, data.len() as u64)?;
        if !data.is_empty() {
            enc.segment(0, data.len() as u64, &mut &data[..])?;
        }
        enc.end_file()?;
        enc.end().map(drop)
    };
    let mut r = run_stream(t, &argv, Some(&mut input), &mut drain)?;
    match std::mem::replace(&mut r.input, Ok(())) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe || r.status == 0 => {
            Err(transfer_failure(format!("writing {}:{path}", t.sandbox), e))
        }
        _ => streamed(t, &argv, r, || format!("writing {}:{path}", t.sandbox)),
    }
}

/// The sandbox's `/state/workspace` as a tar stream, converted as it
/// arrives (holes become zeros in tar), within `limits`. Ok: what the
/// helper left out (fifos, sockets, devices), for a warning.
pub fn backup(t: &Target, out: impl std::io::Write, limits: &Limits) -> Result<Skipped> {
    let argv = helper_argv(t, false, &["send", WORKSPACE]);
    let mut out = Some(out);
    let mut skipped = Skipped::default();
    let mut output = |r: &mut dyn std::io::Read| {
        let mut dec = transfer::Decoder::new(std::io::BufReader::new(r), "workspace", *limits)?;
        transfer::archive::to_tar(&mut dec, out.take().expect("read once"))?;
        skipped = dec.skipped().clone();
        Ok(())
    };
    let r = run_stream(t, &argv, None, &mut output)?;
    streamed(t, &argv, r, || format!("backing up {}:{WORKSPACE}", t.sandbox))?;
    Ok(skipped)
}

pub const WORKSPACE: &str = "/state/workspace";

/// Replace the sandbox's `/state/workspace` with a tar stream. The whole
/// archive is read (to an unnamed temporary file, at most `limits.max_bytes`)
/// and checked before anything in the sandbox changes: an empty, truncated
/// or non-tar input fails (exit 1), an entry that would escape is refused
/// (exit 2).
pub fn restore(t: &Target, input: impl std::io::Read, limits: &Limits) -> Result<()> {
    send_archive(t, input, limits, WORKSPACE, true)
}

/// A tar archive into the sandbox, checked whole first: `restore`
/// (replacing `dest`) and `cp - ID:/dir` (extracted into the existing
/// directory `dest`, as `docker cp` does; nothing outside it).
fn send_archive(t: &Target, input: impl std::io::Read, limits: &Limits, dest: &str, replace: bool) -> Result<()> {
    use transfer::archive::Problem;
    let problem = |p: Problem| match p {
        Problem::NotTar(reason) => {
            TransferError::NotTar { command: if replace { "restore" } else { "cp" }, reason }.into()
        }
        Problem::Refused(m) => Error::Invalid(Invalid::new("archive", "stdin", format!("refusing the archive: {m}"))),
        Problem::Io(e) => Error::io("reading the tar stream", e),
    };
    let mut file = transfer::archive::spool(input, limits.max_bytes).map_err(problem)?;
    transfer::archive::check(&mut file).map_err(problem)?;
    let argv = helper_argv(t, true, &["receive", dest, if replace { "--replace" } else { "--into" }]);
    let mut input = |w: &mut dyn std::io::Write| {
        let mut enc = transfer::Encoder::new(std::io::BufWriter::new(w))?;
        transfer::archive::send_tar(&mut file, "workspace", &mut enc)?;
        enc.end().map(drop)
    };
    let mut r = run_stream(t, &argv, Some(&mut input), &mut drain)?;
    if let Err(e) = std::mem::replace(&mut r.input, Ok(())) {
        if r.status == 0 {
            return Err(transfer_failure("sending the archive".into(), e));
        }
    }
    streamed(t, &argv, r, || format!("restoring {}:{dest}", t.sandbox))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;

    #[test]
    fn cp_sides() {
        assert_eq!(
            parse_cp_side("sbx-0123456789ab:/tmp/x").unwrap(),
            CpSide::Sandbox { id: "sbx-0123456789ab".parse().unwrap(), path: "/tmp/x".into() }
        );
        assert_eq!(parse_cp_side("./local:file").unwrap(), CpSide::Host("./local:file".into()));
        assert!(parse_cp_side("sbx-0123456789ab:tmp").is_err());
        assert!(parse_cp_side("sbx-0123456789ab:/a/../etc").is_err());
        assert!(parse_cp_side("sbx-01:/tmp").is_err());
    }

    /// Through the seam: the helper's answer names a
    /// sibling of what was asked for; a restore of nothing.
    #[test]
    fn cp_out_refuses_a_hostile_stream_and_restore_refuses_no_archive() {
        let f = FakeDocker::new();
        let dst = std::env::temp_dir().join(format!("sbx-wb-cp-{}-{:x}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&dst).unwrap();
        let mut s = transfer::Encoder::new(Vec::new()).unwrap();
        for (p, d) in [("report.txt", &b"ok"[..]), ("sibling.txt", b"x")] {
            s.file(p, 0o644, 0, d.len() as u64).unwrap();
            s.segment(0, d.len() as u64, &mut &d[..]).unwrap();
            s.end_file().unwrap();
        }
        f.push(Output { status: 0, stdout: s.end().unwrap(), stderr: vec![] });
        let src = CpSide::Sandbox { id: Target::test(&f, "sbx-0123456789ab"), path: "/tmp/report.txt".into() };
        let err = cp(&src, &CpSide::Host(dst.clone()), &Limits::default()).unwrap_err();
        assert!(err.to_string().contains("refusing entry \"sibling.txt\""), "{err}");
        assert!(matches!(err, Error::Transfer(crate::error::TransferError::Refused { .. })), "{err}");
        assert_eq!(f.calls()[0], ["exec", "--", "sbx-0123456789ab", "/run/sbx/helper", "send", "/tmp/report.txt"]);
        assert!(!dst.join("sibling.txt").exists());
        std::fs::remove_dir_all(&dst).unwrap();
        // No docker call at all: the fake panics on an unscripted one.
        let err = restore(&Target::test(&f, "sbx-0123456789ab"), &b""[..], &Limits::default()).unwrap_err();
        assert!(err.to_string().contains("stdin is not a tar archive (0 bytes)"), "{err}");
        assert_eq!(f.calls().len(), 1);
    }
}
