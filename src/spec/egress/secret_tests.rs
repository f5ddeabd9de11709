use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use super::*;

/// A scratch directory removed when the test ends, pass or fail.
struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
impl Tmp {
    fn new() -> Tmp {
        let d = std::env::temp_dir().join(format!("sbx-secret-{:016x}", rand::random::<u64>()));
        std::fs::create_dir(&d).unwrap();
        Tmp(d)
    }
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

fn ok(s: &str) -> SecretSpec {
    SecretSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn parses_every_part_with_defaults() {
    let s = ok("OPENAI_API_KEY@API.openai.com=env:OPENAI_KEY");
    assert_eq!(
        s,
        SecretSpec {
            name: "OPENAI_API_KEY".into(),
            host: "api.openai.com".into(),
            port: 443,
            header: DEFAULT_HEADER.into(),
            source: SecretSource::Env("OPENAI_KEY".into()),
        }
    );
    let s = ok("_K2@git.example.com:8443/X-Api-Key=file:/run/k");
    assert_eq!((s.port, s.header.as_str()), (8443, "X-Api-Key"));
    assert_eq!(s.source, SecretSource::File("/run/k".into()));
    assert_eq!(s.source.kind(), "file");
}

/// Every refusal is exit 2, and none shows what follows '=' unless it is a
/// well-formed SOURCE.
#[test]
fn refuses_every_bad_part_without_echoing_a_value() {
    for (s, why) in [
        ("K@h.example=sk-live-123", "env:VAR or file:PATH"),
        ("K@h.example=env:", "env:VAR or file:PATH"),
        ("K@h.example=env:A-B", "env:VAR or file:PATH"),
        ("K@h.example=file:", "env:VAR or file:PATH"),
        ("K@h.example=", "env:VAR or file:PATH"),
        ("sk-live-123", "no '=SOURCE'"),
        ("K=env:V", "no '@HOST'"),
        ("k@h.example=env:V", "A-Z, 0-9"),
        ("1K@h.example=env:V", "A-Z, 0-9"),
        ("@h.example=env:V", "A-Z, 0-9"),
        ("HTTPS_PROXY@h.example=env:V", "sbx itself sets"),
        ("SSL_CERT_FILE@h.example=env:V", "sbx itself sets"),
        ("SBX_X@h.example=env:V", "sbx itself sets"),
        ("K@*.example.com=env:V", "wildcard"),
        ("K@10.0.0.1=env:V", "address"),
        ("K@[::1]=env:V", "address"),
        ("K@localhost=env:V", "loopback"),
        ("K@h_x.example=env:V", "DNS name"),
        ("K@=env:V", "empty"),
        ("K@h.example:80=env:V", "plain HTTP"),
        ("K@h.example:0=env:V", "1 to 65535"),
        ("K@h.example:x=env:V", "1 to 65535"),
        ("K@h.example/=env:V", "field name"),
        ("K@h.example/X:Y=env:V", "field name"),
        ("K@h.example/Bad Header=env:V", "field name"),
        ("K@h.example/Host=env:V", "frames or routes"),
        ("K@h.example/content-length=env:V", "frames or routes"),
    ] {
        let e = SecretSpec::parse(s).unwrap_err();
        assert_eq!(e.what, "--secret", "{s}");
        assert!(e.reason.contains(why), "{s}: {}", e.reason);
        assert!(!e.to_string().contains("sk-live") && !e.value.contains("sk-live"), "{s}: {e}");
    }
    assert_eq!(SecretSpec::parse("K@h.example=sk-1").unwrap_err().value, "K@h.example=(not shown)");
}

#[test]
fn reads_a_set_variable_and_refuses_an_unset_or_unsafe_one() {
    // A name no other test or the environment uses.
    std::env::set_var("SBX_TEST_SECRET_READ_1", "tok-123\n");
    assert_eq!(SecretSource::Env("SBX_TEST_SECRET_READ_1".into()).read("--secret", "K").unwrap(), "tok-123");
    std::env::set_var("SBX_TEST_SECRET_READ_2", "has space");
    let e = SecretSource::Env("SBX_TEST_SECRET_READ_2".into()).read("--secret", "K").unwrap_err();
    assert!(e.reason.contains("visible ASCII") && !e.to_string().contains("has space"), "{e}");
    let e = SecretSource::Env("SBX_TEST_SECRET_UNSET".into()).read("--secret", "K").unwrap_err();
    assert!(e.reason.contains("not set"), "{e}");
}

#[test]
fn reads_an_owner_only_file_and_refuses_others() {
    let d = Tmp::new();
    let p = d.path().join("k");
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(b"ghp_abc\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    let src = SecretSource::File(p.clone());
    assert_eq!(src.read("--secret", "K").unwrap(), "ghp_abc");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    let e = src.read("--secret", "K").unwrap_err();
    assert!(e.reason.contains("0640") && !e.to_string().contains("ghp_abc"), "{e}");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&p, b"a\r\nb").unwrap();
    assert!(src.read("--secret", "K").unwrap_err().reason.contains("visible ASCII"));
    std::fs::write(&p, vec![b'a'; MAX_VALUE as usize + 1]).unwrap();
    assert!(src.read("--secret", "K").unwrap_err().reason.contains("larger"));
    let link = d.path().join("l");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    assert!(SecretSource::File(link).read("--secret", "K").unwrap_err().reason.contains("opened"));
    let e = SecretSource::File(d.path().into()).read("--secret", "K").unwrap_err();
    assert!(e.reason.contains("regular file"), "{e}");
    assert!(SecretSource::File(d.path().join("none")).read("--secret", "K").is_err());
}
