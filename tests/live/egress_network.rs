//! sbx's own egress network: without `--egress-network` the gate
//! reaches out through `sbx-egress-net`, a non-internal bridge sbx makes on
//! first use with inter-container traffic off, that the sandbox is never on
//! and that `gc` removes once no gate uses it. The only live test on the
//! host-wide default (the others pass their own networks); a gc of another
//! test meanwhile is harmless: docker refuses to remove a network a gate is on.
//! Also what the record says of egress: env, labels, `ls`, `ls --json`.

use crate::support::egress::*;
use crate::support::*;

const NET: &str = "sbx-egress-net";

/// The containers on `NET` (empty when it is gone).
fn on_net() -> Vec<String> {
    let out = docker(&["network", "inspect", "--format", "{{range $k, $v := .Containers}}{{$v.Name}} {{end}}", NET]);
    stdout(&out).split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_default_egress_network_is_made_on_first_use_and_gc_removes_it_once_no_gate_uses_it() {
    let w = World::new();
    let a = create(&w, &strings(&["--allow", "files.example:80"]));
    let b = create(&w, &strings(&["--allow", "pypi.org", "--egress", "observe"]));
    let get = |f: &str| docker_ok(&["network", "inspect", "--format", f, NET]);
    assert_eq!(get("{{.Driver}} {{.Internal}}"), "bridge false", "sbx's egress network must reach out");
    assert_eq!(
        get("{{index .Options \"com.docker.network.bridge.enable_icc\"}}"),
        "false",
        "gates could reach each other"
    );
    assert_eq!(get("{{index .Labels \"sbx.egress-net\"}}"), "1");
    let on = on_net();
    for sb in [&a, &b] {
        assert!(on.contains(&format!("{}-gate", sb.id)), "the gate of {} is not on {NET}: {on:?}", sb.id);
        assert!(!on.contains(&sb.id), "the sandbox {} is on the egress network", sb.id);
        assert_eq!(sb.inspect("{{index .Config.Labels \"sbx.egress-network\"}}"), NET);
    }

    // The record says which sandboxes have egress, in which mode, with which allowlist.
    let env = a.inspect("{{json .Config.Env}}");
    assert!(env.contains("\"SBX_SANDBOX_EGRESS=enforce\"") && env.contains("\"SBX_SANDBOX_TIER=2\""), "{env}");
    assert!(b.inspect("{{json .Config.Env}}").contains("\"SBX_SANDBOX_EGRESS=observe\""));
    let ls = stdout(&w.sbx(&["ls"]));
    let row = |id: &str| ls.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("{id} not listed: {ls}"));
    assert!(row(&a.id).contains("egress(enforce)") && row(&b.id).contains("egress(observe)"), "{ls}");
    let out = w.sbx(&["ls", "--json"]);
    assert_success(&out, "sbx ls --json");
    let recs = json(&out);
    let rec = |id: &str| recs.as_array().unwrap().iter().find(|r| r["id"] == id).cloned().unwrap();
    assert_eq!(rec(&a.id)["egress"]["mode"], "enforce");
    assert_eq!(rec(&a.id)["egress"]["allow"], serde_json::json!(["files.example:80"]));
    assert_eq!(rec(&b.id)["egress"]["mode"], "observe");
    let insp = json(&w.sbx(&["inspect", &a.id, "--json"]));
    assert_eq!((&insp["egress"]["network"], &insp["egress"]["active"]), (&NET.into(), &true.into()), "{insp}");

    // One gate gone: the other keeps the network.
    let a_id = a.id.clone();
    drop(a);
    assert_no_egress_left(&w, &a_id);
    assert_success(&w.sbx(&["gc"]), "sbx gc");
    assert!(on_net().contains(&format!("{}-gate", b.id)), "gc removed {NET} under a gate");

    // No gate left: gc removes it (unless a gate of another sbx on this host uses it).
    let b_id = b.id.clone();
    drop(b);
    assert_no_egress_left(&w, &b_id);
    let out = w.sbx(&["gc", "--json"]);
    assert_success(&out, "sbx gc");
    let gone = docker(&["network", "inspect", NET]).status.code() == Some(1);
    assert!(gone || !on_net().is_empty(), "gc left {NET} with no gate on it: {}", stdout(&out));
    w.assert_nothing_left();
}
