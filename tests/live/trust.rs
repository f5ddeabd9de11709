//! Trust: nothing the image or another sandbox controls
//! may become sbx's record or redirect what sbx does, and a container that
//! merely carries sbx's labels is never adopted.

use std::path::PathBuf;

use crate::support::*;

/// A hostile image: the fixture binary alone (as in the fixture image) plus
/// `files`, with the Dockerfile `changes`. Removed on drop.
fn hostile_image(changes: &[&str], files: &[(&str, &str)]) -> Image {
    let tree = ImageTree::new(&["etc"]).changes(changes);
    for (path, text) in files {
        std::fs::write(tree.root().join(path), text).unwrap();
    }
    tree.import()
}

/// `LABEL sbx.private=...` made `revoke` detach the
/// operator's service and delete its network; `LABEL sbx.volume=...`
/// blocked another session's `--persist`. Such an image is refused, and
/// nothing on the engine changes.
#[test]
fn an_image_with_sbx_labels_is_refused_and_nothing_changes() {
    let w = World::new();
    let img = hostile_image(&["LABEL sbx.private={\"sbx-rtsvc\":\"rtsvc\"}", "LABEL sbx.volume=sbx-state-victim"], &[]);
    let labels = docker_ok(&["image", "inspect", "--format", "{{json .Config.Labels}}", &img.0]);
    assert!(labels.contains("sbx.private") && labels.contains("sbx.volume"), "{labels}");
    let label = w.case_label();
    let session = format!("{}-s", w.case);
    for extra in [&[][..], &["--session", &session, "--persist"][..]] {
        let mut args = vec!["create", "--image", &img.0, "--label", &label];
        args.extend_from_slice(extra);
        let out = w.sbx(&args);
        assert_exit(&out, 1, "create from an image carrying sbx labels");
        let err = stderr(&out);
        assert!(err.contains("\"sbx.private\"") && err.contains("rebuild the image without"), "{err}");
    }
    w.assert_nothing_left();
    // Other tests share the engine: look for what this create could have made.
    assert_eq!(docker_ok(&["network", "ls", "-q", "--filter", "label=sbx.service=rtsvc"]), "", "no network made");
    assert!(!docker(&["volume", "inspect", &format!("sbx-state-{session}")]).status.success(), "no volume made");
}

/// A container that merely carries `sbx.volume` (any
/// label is anyone's to set) does not hold a session's volume.
#[test]
fn a_label_alone_does_not_block_a_persistent_session() {
    let w = World::new();
    let session = format!("{}-s", w.case);
    let squatter = unique("sbx-squat-");
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &squatter,
        "--label",
        TEST_LABEL,
        "--label",
        &w.case_label(),
        "--label",
        &format!("sbx.volume=sbx-state-{session}"),
        "--network",
        "none",
        &w.image,
        "sleep",
    ]);
    let out = w.try_create(&["--session", &session, "--persist"]);
    let _ = docker(&["rm", "-f", &squatter]);
    assert_success(&out, "create --persist next to a container that only carries the label");
    let sb = w.adopt(stdout(&out).trim());
    drop(sb);
}

/// With P a tier-2 sandbox, `create --route pivot:P:8080
/// --private-routes` attached P to the new sandbox's network. Refused, P
/// unchanged; and a network attached to P outside sbx shows in `inspect`
/// and `ls`, and the tier drops.
#[test]
fn a_sandbox_is_never_a_route_service_and_foreign_networks_show() {
    let w = World::new();
    let net = Network::new(true);
    let svc = Service::start(&net, &w.image);
    let extra = Network::new(false);
    let p = w.create(&["--route", &format!("svc:{}:8080", svc.name), "--private-routes"]);
    let nets_of = |id: &str| {
        docker_ok(&["inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", id])
    };
    let before = nets_of(&p.id);
    let inspect = |id: &str| {
        let out = w.sbx(&["inspect", id]);
        assert_success(&out, "sbx inspect");
        json(&out)
    };
    assert_eq!(inspect(&p.id)["tier"], 2);

    let out = w.try_create(&["--route", &format!("pivot:{}:8080", p.id), "--private-routes"]);
    assert_exit(&out, 1, "a private route to another sandbox");
    assert!(stderr(&out).contains(&format!("route service \"{}\"", p.id)), "{}", stderr(&out));
    assert_eq!(nets_of(&p.id), before, "P was attached to something");
    assert_eq!(w.containers(), vec![docker_ok(&["inspect", "--format", "{{.Id}}", &p.id])[..12].to_string()]);

    docker_ok(&["network", "connect", &extra.name, &p.id]);
    let r = inspect(&p.id);
    assert_eq!(r["tier"], 1, "{r}");
    let nets = r["networks"].as_array().unwrap();
    assert!(nets.contains(&serde_json::json!({"name": extra.name, "by_sbx": false})), "{r}");
    assert!(nets.iter().any(|n| n["by_sbx"] == true), "its own route network is listed too: {r}");
    assert!(r["gaps"][0].as_str().unwrap().contains(&format!("{} attached outside sbx", extra.name)), "{r}");
    let ls = json(&w.sbx(&["ls", "--json"]));
    let row = ls.as_array().unwrap().iter().find(|x| x["id"] == p.id.as_str()).expect("ls lists P");
    assert_eq!(row["tier"], 1, "{row}");
    drop(p);
    drop(svc);
}

/// The `Gid:` and `Groups:` lines of a `/proc/PID/status`.
fn gid_lines(status: &str) -> Vec<String> {
    status.lines().filter(|l| l.starts_with("Gid:") || l.starts_with("Groups:")).map(str::to_string).collect()
}

fn has_group_0(lines: &[String]) -> bool {
    lines.iter().any(|l| l.split_whitespace().skip(1).any(|g| g == "0"))
}

/// `USER 1000:0` ran as gid 0 with no warning. The
/// image's USER is not used at all (the sandbox gets a uid:gid of sbx's
/// range), so it never yields gid 0, nor do its /etc/group memberships
/// (checked on what the processes really have); `--user X:0` does, with a
/// warning.
#[test]
fn the_image_never_chooses_group_0() {
    let w = World::new();
    let hostile = hostile_image(
        &["USER 1000:0"],
        &[
            ("etc/passwd", "root:x:0:0:root:/:/bin/fixture\nuser1000:x:1000:1000::/tmp:/bin/fixture\n"),
            ("etc/group", "root:x:0:user1000\nwheel:x:10:user1000\nuser1000:x:1000:\n"),
        ],
    );
    let label = w.case_label();
    let out = w.sbx(&["create", "--image", &hostile.0, "--label", &label]);
    assert_success(&out, "create from an image with USER 1000:0");
    let sb = w.adopt(stdout(&out).trim());
    assert!(stderr(&out).contains("\"1000:0\" is not used"), "no warning: {}", stderr(&out));
    let pid = sb.inspect("{{.State.Pid}}");
    let main = gid_lines(&std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap());
    assert!(!has_group_0(&main), "the sandbox's process: {main:?}");
    assert!(main[0].starts_with(&format!("Gid:\t{}\t", sb.uid())), "{main:?}");
    let exec = w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "read", "/proc/self/status"]);
    assert_success(&exec, "sbx exec");
    let execd = gid_lines(&stdout(&exec));
    assert!(!has_group_0(&execd) && execd.len() == 2, "an exec'd process: {execd:?}");
    drop(sb);

    // Asked for explicitly: allowed, with a warning.
    let out = w.sbx(&["create", "--image", &w.image, "--label", &label, "--user", "65534:0"]);
    assert_success(&out, "create --user 65534:0");
    let sb = w.adopt(stdout(&out).trim());
    assert!(stderr(&out).contains("group 0 (root)"), "{}", stderr(&out));
    let pid = sb.inspect("{{.State.Pid}}");
    let main = gid_lines(&std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap());
    assert!(main[0].starts_with("Gid:\t0\t"), "{main:?}");
}

/// A container made by hand with a sandbox's name format
/// and its labels copied: `exec` ran in it as uid 0 and `stats` worked.
/// Every command that touches a sandbox refuses it, and nothing runs in it.
#[test]
fn every_command_refuses_an_impostor_and_nothing_runs_in_it() {
    let w = World::new();
    let real = w.create(&[]);
    let labels: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&real.inspect("{{json .Config.Labels}}")).unwrap();
    let name = format!("sbx-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
    let mut run =
        vec!["run".to_string(), "-d".into(), "--name".into(), name.clone(), "--network".into(), "none".into()];
    for (k, v) in &labels {
        let v = if k == "sbx.id" { name.clone() } else { v.clone() };
        run.extend(["--label".to_string(), format!("{k}={v}")]);
    }
    run.extend([w.image.clone(), "sleep".into()]);
    docker_ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
    let host_file = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("trust-cp-"));
    std::fs::write(&host_file, b"x").unwrap();
    let host = host_file.to_str().unwrap();
    let into = format!("{name}:/tmp/pwned-cp");
    let out_of = format!("{name}:/bin/fixture");
    let got = format!("{host}.got");
    let commands: Vec<Vec<&str>> = vec![
        vec!["exec", &name, "--", "/bin/fixture", "write", "/tmp/pwned"],
        vec!["exec", "-d", &name, "--", "/bin/fixture", "write", "/tmp/pwned-bg"],
        vec!["exec", "-u", "0", &name, "--", "/bin/fixture", "write", "/tmp/pwned-root"],
        vec!["shell", &name],
        vec!["ps", &name],
        vec!["kill", &name, "p0000abcd"],
        vec!["logs", &name],
        vec!["logs", &name, "p0000abcd"],
        vec!["cp", host, &into],
        vec!["cp", &out_of, &got],
        vec!["stats", &name],
        vec!["stats", &real.id, &name],
        vec!["port-forward", &name, "8080"],
        vec!["wait-port", &name, "8080", "--timeout", "1s"],
        vec!["backup", &name],
        vec!["restore", &name],
        vec!["connect", &name],
        vec!["ttl", &name, "1h"],
        vec!["revoke", &name, "inference"],
        vec!["revoke", &name, "all"],
        vec!["audit", &name],
        vec!["inspect", &name],
        vec!["destroy", &name],
    ];
    for args in &commands {
        // A command that wrongly went ahead may wait (port-forward): bounded.
        let out = std::process::Command::new("timeout")
            .arg("20")
            .arg(SBX)
            .args(w.dir_args())
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_exit(&out, 1, &format!("sbx {args:?} on an impostor"));
        assert!(stderr(&out).contains("not a sandbox of this host"), "sbx {args:?}: {}", stderr(&out));
    }
    assert!(!std::path::Path::new(&got).exists(), "cp read from the impostor");
    for f in ["/tmp/pwned", "/tmp/pwned-bg", "/tmp/pwned-root", "/tmp/pwned-cp"] {
        let out = docker(&["exec", &name, "/bin/fixture", "exists", f]);
        assert_eq!(out.status.code(), Some(1), "{f} was written in the impostor");
    }
    let top = docker_ok(&["top", &name, "-eo", "pid,args"]);
    assert_eq!(top.lines().count(), 2, "only its own process runs: {top}");
    assert_eq!(docker_ok(&["inspect", "--format", "{{.State.Running}}", &name]), "true", "the impostor survives");
    docker_ok(&["rm", "-f", &name]);
    let _ = std::fs::remove_file(&host_file);
}

#[test]
fn foreign_containers_with_sbx_labels_are_not_adopted() {
    let w = World::new();
    let name = format!("sbx-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &name,
        "--label",
        &w.case_label(),
        "--label",
        "sbx.managed=1",
        "--label",
        "sbx.id=sbx-000000000000",
        "--network",
        "none",
        &w.image,
        "sleep",
    ]);
    let ls = stdout(&w.sbx(&["ls"]));
    assert!(!ls.contains(&name), "ls adopted a foreign container:\n{ls}");
    let out = w.sbx(&["destroy", &name]);
    assert_exit(&out, 1, "destroy a foreign container");
    assert!(stderr(&out).contains("not created by sbx"));
    assert_eq!(w.containers().len(), 1, "the foreign container survives");
}
