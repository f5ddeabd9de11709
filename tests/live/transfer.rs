//! Live tests of what comes out of a sandbox on `cp`, `backup` and
//! `restore` (issue 9 findings 1b and 6, issue 10 item 2): a hostile record
//! stream writes nothing outside what was asked for, sparse files stay
//! sparse and small in memory, caps hold, and restore refuses input that is
//! not a whole tar before anything changes.

use std::os::unix::fs::MetadataExt;

use crate::support::*;

/// A record stream as a replaced helper could send it.
fn stream(records: &[(u8, u32, &str, &[u8])]) -> Vec<u8> {
    let mut v = b"SBXREC\x00\x03".to_vec();
    for (kind, mode, path, data) in records {
        v.push(*kind);
        v.extend_from_slice(&mode.to_be_bytes());
        v.extend_from_slice(&0i64.to_be_bytes());
        v.extend_from_slice(&(path.len() as u16).to_be_bytes());
        v.extend_from_slice(path.as_bytes());
        v.extend_from_slice(&(data.len() as u64).to_be_bytes());
        v.extend_from_slice(&0u64.to_be_bytes());
        v.extend_from_slice(&(data.len() as u64).to_be_bytes());
        v.extend_from_slice(data);
        v.extend_from_slice(&[0u8; 16]);
    }
    v.push(b'E');
    v.extend_from_slice(&[0u8; 22]);
    v
}

/// Issue 9 finding 1b, end to end through the real binary: the helper's
/// answer to `cp ID:/tmp/report.txt .` in a git checkout also names a
/// sibling and `.git/hooks/pre-commit`. The answer is played by a docker
/// stand-in (SBX_DOCKER) so the stream is exactly the hostile one.
#[test]
fn a_stream_naming_a_sibling_and_a_git_hook_writes_neither() {
    let w = World::new();
    let checkout = w.socket_root.join("checkout");
    std::fs::create_dir_all(checkout.join(".git/hooks")).unwrap();
    let evil = w.socket_root.join("evil.stream");
    std::fs::write(
        &evil,
        stream(&[
            (b'F', 0o644, "report.txt", b"the report\n"),
            (b'F', 0o644, "sibling.txt", b"planted\n"),
            (b'F', 0o755, ".git/hooks/pre-commit", b"#!/bin/sh\necho pwned\n"),
        ]),
    )
    .unwrap();
    let fake = w.socket_root.join("docker");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = send ] && exec cat '{}'; done\nexec docker \"$@\"\n",
            evil.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
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

/// Issue 9 finding 6: three sparse 1 GiB files cost ~0 bytes in the
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
    // A correctness bound, not a timing one: nothing is held whole.
    assert!(rss_kib < 128 * 1024, "sbx peaked at {rss_kib} KiB");
    assert_exit(&w.sbx(&["cp", "--max-bytes", "lots", &src, dst.to_str().unwrap()]), 2, "a bad --max-bytes");

    // backup is capped the same way.
    assert_success(&sb.exec(&["mkdir", "/state/workspace"]), "mkdir");
    assert_success(&sb.exec(&["sparse", "/state/workspace/big", "2048"]), "a sparse file in the workspace");
    let out = w.sbx(&["backup", &sb.id]);
    assert_exit(&out, 1, "backup over the cap");
    assert!(stderr(&out).contains("--max-bytes"), "{}", stderr(&out));
}

fn workspace_has(sb: &Sandbox, path: &str) -> bool {
    sb.exec(&["exists", &format!("/state/workspace/{path}")]).status.success()
}

/// Issue 10 item 2: `sbx restore ID < /dev/null` exited 0 and emptied the workspace.
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
