use super::*;

pub(super) const IMG: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A valid request, for the tests here and in `request.rs`.
pub(super) fn req() -> CreateRequest {
    CreateRequest { image: IMG.into(), ..Default::default() }
}

#[test]
fn users() {
    assert_eq!(UserSpec::parse("1000").unwrap(), UserSpec { uid: 1000, gid: 1000 });
    assert_eq!(UserSpec::parse("1000:50").unwrap(), UserSpec { uid: 1000, gid: 50 });
    assert_eq!(UserSpec::parse("0").unwrap(), UserSpec { uid: 0, gid: 0 });
    for bad in ["", "root", "1000:", ":1", "-1", "1 000", "99999999999", "1:2:3", "4294967295", "1:4294967295"] {
        assert!(UserSpec::parse(bad).unwrap_err().reason.contains("numeric"), "{bad}");
    }
}

/// Root's links in a writable mount are the ones `sbx cp` follows: a root
/// sandbox gets read-only host mounts only.
#[test]
fn root_gets_no_writable_host_mount() {
    let d = std::env::current_dir().unwrap().canonicalize().unwrap().display().to_string();
    let root = |r: CreateRequest| SandboxSpec::from_request(&CreateRequest { user: Some("0".into()), ..r }, None);
    for r in [
        CreateRequest { rw: vec![format!("{d}:/w")], ..req() },
        CreateRequest { ro: vec![format!("{d}:/r")], rw: vec![format!("{d}:/w")], ..req() },
        CreateRequest { state_dir: Some(d.clone()), ..req() },
    ] {
        let e = root(r).unwrap_err();
        assert!(e.what == "--user" && e.reason.contains("sbx cp follows"), "{e:?}");
    }
    assert!(root(CreateRequest { ro: vec![format!("{d}:/r")], ..req() }).is_ok());
    let e = SandboxSpec::from_request(
        &CreateRequest { user: Some("0:5".into()), rw: vec![format!("{d}:/w")], ..req() },
        None,
    );
    assert!(e.is_err(), "any gid");
    let u = CreateRequest { user: Some("1000:0".into()), rw: vec![format!("{d}:/w")], ..req() };
    assert!(SandboxSpec::from_request(&u, None).is_ok(), "group 0 makes links of uid 1000");
}

#[test]
fn env_and_labels() {
    assert_eq!(parse_env("A_1=x=y").unwrap(), ("A_1".into(), "x=y".into()));
    assert_eq!(parse_env("A=").unwrap(), ("A".into(), "".into()));
    for (bad, why) in
        [("A", "K=V"), ("1A=x", "name"), ("A-B=x", "name"), ("=x", "name"), ("SBX_SANDBOX_TIER=3", "reserved")]
    {
        assert!(parse_env(bad).unwrap_err().reason.contains(why), "{bad}");
    }
    assert!(parse_label("ci.job=42").is_ok());
    for bad in ["sbx.tier=2", "SBX.Tier=2", "sbx-probe.hash=x", "sbx=1"] {
        assert!(parse_label(bad).unwrap_err().reason.contains("sbx's own"), "{bad}");
    }
    assert!(parse_label("sbx-test.fixture=1").is_ok(), "a key sbx never reads");
    assert!(parse_label("a=b\nc").is_err());
}

#[test]
fn sessions_ids_durations_cpus() {
    assert!(parse_session("agent-7.run_1").is_ok());
    for bad in ["", "-x", "a b", "a/b", "a\nb", &"x".repeat(129), "ünï", "sbx-doctor", "SBX-Doctor"] {
        assert!(parse_session(bad).is_err(), "{bad:?}");
    }
    let id = new_id();
    assert_eq!(parse_id(&id).unwrap(), id);
    for bad in ["sbx-0123", "sbx-0123456789AB", "../sbx-0123456789ab", "0123456789ab", "sbx-0123456789ab/"] {
        assert!(parse_id(bad).is_err(), "{bad}");
    }
    assert_eq!(parse_duration("w", "0").unwrap(), Duration::ZERO);
    assert_eq!(parse_duration("w", "1m30s").unwrap(), Duration::from_secs(90));
    assert!(parse_duration("w", "soon").is_err());
    // sbx's words, not the parser's.
    assert_eq!(parse_duration("w", "x").unwrap_err().reason, "it is not a duration");
    assert_eq!(parse_duration("w", "5m1").unwrap_err().reason, "a number lacks its unit (ms, s, m, h, d)");
    assert_eq!(parse_duration("w", "5 parsecs").unwrap_err().reason, "\"parsecs\" is not a unit (ms, s, m, h, d)");
    assert_eq!(parse_ttl("2h").unwrap(), Duration::from_secs(7200));
    for bad in ["0", "500ms", "400d", "-1s"] {
        assert!(parse_ttl(bad).is_err(), "{bad}");
    }
    assert!(parse_cpus("1.5").is_ok());
    for bad in ["0", "-1", "nan", "inf", "1e3", "x"] {
        assert!(parse_cpus(bad).is_err(), "{bad}");
    }
}

#[test]
fn persist_clone_and_setup() {
    let r = CreateRequest { persist: true, ..req() };
    assert!(SandboxSpec::from_request(&r, None).unwrap_err().hint.unwrap().contains("--session"));
    let r = CreateRequest {
        persist: true,
        session: Some("s".into()),
        clone: Some("file:///srv/repo#main".into()),
        ..req()
    };
    let s = SandboxSpec::from_request(&r, None).unwrap();
    assert_eq!(s.clone, Some(CloneSpec { url: "file:///srv/repo".into(), reference: Some("main".into()) }));
    let r = CreateRequest { clone: Some("file:///srv/repo".into()), ..req() };
    assert!(SandboxSpec::from_request(&r, None).unwrap_err().hint.unwrap().contains("--persist"));
    for bad in
        ["ext::sh -c touch% /tmp/pwned", "-uhttp://x", "http://x#--upload-pack=x", "http://x#a..b", "", "http://a b"]
    {
        assert!(CloneSpec::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(parse_setup("make 'a b' \"c d\" e\\ f").unwrap(), ["make", "a b", "c d", "e f"]);
    assert_eq!(parse_setup("echo $(reboot); rm -rf /").unwrap(), ["echo", "$(reboot);", "rm", "-rf", "/"]);
    assert!(parse_setup("unbalanced 'quote").is_err());
    assert!(parse_setup("   ").is_err());
}

#[test]
fn cpus_as_docker_takes_them() {
    for ok in ["0.01", "1", "1.5", "2", "2.000000000000", "0.123456789"] {
        assert_eq!(parse_cpus_on(ok, 2).unwrap(), ok);
    }
    for (bad, why) in [
        ("0.001", "between"),
        ("2.5", "between"),
        ("3", "between"),
        ("0.0123456789", "9 decimals"),
        ("1e0", "plain"),
        ("+1", "plain"),
        ("x", "number"),
    ] {
        assert!(parse_cpus_on(bad, 2).unwrap_err().reason.contains(why), "{bad}");
    }
}
