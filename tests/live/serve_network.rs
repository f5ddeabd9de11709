//! `sbx serve`'s create defaults and E2B's network options, driven by the
//! real E2B SDK: a bad create flag exits 2 before anything listens,
//! `allow_internet_access: true` is refused (the SDK's exception) without
//! `--allow-internet`, allow_out reaches its host only (on the test's own
//! egress network), update_network cuts it, get_metrics, a pool template.

use crate::support::serve::*;
use crate::support::*;

#[test]
fn serve_with_a_bad_create_flag_exits_2_before_listening() {
    let w = World::new();
    for (args, what) in [
        (vec!["serve", "--listen", "127.0.0.1:1", "--cpus", "lots"], "--cpus"),
        (vec!["serve", "--listen", "127.0.0.1:1", "--allow", "127.0.0.1"], "--allow"),
        (vec!["serve", "--listen", "127.0.0.1:1", "--ttl", "1m"], "--ttl"),
        (vec!["serve", "--listen", "127.0.0.1:1", "--egress-network", "host"], "--egress-network"),
    ] {
        let out = w.sbx(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(what), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("listening"), "{args:?} listened: {}", stderr(&out));
    }
}

#[test]
fn allow_internet_access_is_refused_without_allow_internet() {
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
from e2b import Sandbox, SandboxException
try:
    Sandbox.create("debian", allow_internet_access=True)
    raise AssertionError("created")
except SandboxException as e:
    assert "--allow-internet" in str(e), str(e)
try:
    Sandbox.create("debian", network={"rules": {"x.example": [{"transform": {"headers": {"A": "b"}}}]}})
    raise AssertionError("created with a transform")
except SandboxException as e:
    assert "secrets" in str(e), str(e)
assert Sandbox.list().next_items() == []
print("ok")
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, "the SDK script");
    assert_eq!(stdout(&out).trim(), "ok");
    assert!(w.containers().is_empty(), "a refused create left {:?}", w.containers());
}

/// A sandbox made with allow_out to a stand-in reaches it and nothing else;
/// `update_network` cuts it at once; `get_metrics` gives sane numbers.
#[test]
fn allow_out_reaches_its_host_only_and_update_network_cuts_it() {
    use crate::support::egress::fetch;
    use crate::support::internet::{tools_image, EVIL, FILES};
    use std::time::Duration;
    let w = World::new();
    let inet = Internet::start();
    let extra = ["--egress-network", inet.net.name.as_str(), "--egress-dns", inet.dns_ip.as_str(), "--cpus", "2"];
    let s = Server::start_with(&w, &[format!("tools={}", tools_image())], &extra);
    let web = format!("{}/32:80", inet.web_ip);
    let create = format!(
        "from e2b import Sandbox\nsb = Sandbox.create('tools', timeout=300, network={{'allow_out': ['{FILES}:80', '{web}']}})\nprint(sb.sandbox_id)\n"
    );
    let out = s.python(&create, &s.key());
    assert_success(&out, &format!("create (server: {})", s.stderr()));
    let sb = w.adopt(stdout(&out).trim());
    assert_eq!(fetch(&sb, &format!("http://{FILES}/small.txt"), &[]).code, 200, "allowOut's host");
    assert_eq!(fetch(&sb, &format!("http://{EVIL}/small.txt"), &[]).code, 403, "a name allowOut does not list");

    let update = format!(
        "from e2b import Sandbox\nsb = Sandbox.connect('{}')\nsb.update_network({{'allow_out': ['{web}']}})\n\
         m = sb.get_metrics()\nassert len(m) == 1, m\nm = m[0]\n\
         assert m.cpu_count == 2 and 0 <= m.cpu_used_pct <= 100, m\n\
         assert 0 < m.mem_used <= m.mem_total, m\nprint('ok')\n",
        sb.id
    );
    let out = s.python(&update, &s.key());
    assert_success(&out, &format!("update_network and get_metrics (server: {})", s.stderr()));
    let cut = until(Duration::from_secs(3), || fetch(&sb, &format!("http://{FILES}/small.txt"), &[]).code == 403);
    assert!(cut.is_some(), "update_network did not cut {FILES} within 3 s");
}

/// A templateID naming a warm pool claims its ready member, as `create --pool`.
#[test]
fn a_pool_template_claims_a_ready_member() {
    use std::time::Duration;
    let w = World::new();
    let name = format!("warm-{}", &w.case[w.case.len().saturating_sub(8)..]);
    let label = w.case_label();
    let out = w.sbx(&["pool", "create", &name, "--size", "1", "--image", &w.image, "--label", &label]);
    assert_success(&out, "sbx pool create");
    let ready = || -> Vec<String> {
        std::fs::read_dir(w.state_dir.join("pools").join(&name).join("ready"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect::<Vec<String>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|n: &String| n.starts_with("sbx-"))
            .collect()
    };
    let member = ready();
    assert_eq!(member.len(), 1, "{member:?}");
    let s = Server::start(&w, &[]);
    let script = format!(
        "from e2b import Sandbox\nsb = Sandbox.create('{name}', timeout=120)\nprint(sb.sandbox_id)\n\
         assert sb.get_info().template_id == '{name}'\n\
         try:\n    Sandbox.create('{name}', envs={{'A': '1'}})\n    raise AssertionError('envs on a pool')\n\
         except Exception as e:\n    assert 'warm pool' in str(e), str(e)\n"
    );
    let out = s.python(&script, &s.key());
    assert_success(&out, &format!("the SDK script (server: {})", s.stderr()));
    let claimed = stdout(&out).lines().next().unwrap_or_default().to_string();
    assert_eq!(claimed, member[0], "the create did not claim the pool's ready member");
    drop(w.adopt(&claimed));
    // The refiller tops the pool up again; then it goes.
    until(Duration::from_secs(90), || ready().len() == 1 && ready()[0] != claimed)
        .expect("the pool was never refilled");
    std::thread::sleep(Duration::from_secs(1));
    assert_success(&w.sbx(&["pool", "rm", &name]), "sbx pool rm");
}
