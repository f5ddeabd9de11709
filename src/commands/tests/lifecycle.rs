//! `sbx stop`, `start`, `pause`, `resume`: bad input refused before docker,
//! `--json` results and errors, the "already" note.

use super::*;

impl Rig {
    /// [`Rig::owns`] with the container in docker state `status`.
    fn owns_in(&self, status: &str) {
        let mut v: serde_json::Value = serde_json::from_str(&self.record_line(&[])).unwrap();
        v["Id"] = CID.into();
        v["State"]["Status"] = status.into();
        self.fake.push(Output::ok(&v.to_string()));
    }
}

#[test]
fn bad_grace_and_ids_are_refused_before_any_docker_call() {
    let rig = Rig::new();
    assert!(rig.refused(&["stop", "--grace", "soon", ID]).contains("invalid --grace \"soon\""));
    assert!(rig.refused(&["stop", "--grace", "25h", ID]).contains("at most 24h"));
    assert!(rig.refused(&["start", "--socket-wait", "x", ID]).contains("--socket-wait"));
    for verb in ["stop", "start", "pause", "resume"] {
        rig.refused(&[verb, "sbx-nope"]);
    }
}

#[test]
fn results_in_json_and_notes_in_text() {
    let rig = Rig::new();
    rig.owns_in("running");
    rig.fake.push(Output::ok(""));
    let r = rig.sbx(&["--json", "stop", "--grace", "3s", ID]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(json(&r.stdout), serde_json::json!({"id": ID, "state": "stopped", "already": false}));
    assert_eq!(rig.fake.calls()[1], ["stop", "--time", "3", "--", CID]);

    rig.owns_in("exited");
    let r = rig.sbx(&["stop", ID]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
    assert_eq!(r.stderr, format!("sbx: sandbox {ID} was already stopped\n"));

    rig.owns_in("running");
    rig.fake.push(Output::ok(""));
    let r = rig.sbx(&["pause", ID]);
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "", ""));

    rig.owns_in("paused");
    rig.fake.push(Output::ok(""));
    let r = rig.sbx(&["--json", "resume", ID]);
    assert_eq!(json(&r.stdout)["state"], "running");
}

#[test]
fn wrong_state_errors_say_what_to_do() {
    let rig = Rig::new();
    rig.owns_in("running");
    let r = rig.sbx(&["resume", ID]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        r.stderr,
        format!(
            "sbx: error: cannot resume sandbox {ID}: it is running\n\
             sbx: hint: only a paused sandbox resumes; `sbx pause {ID}` freezes it\n"
        )
    );
    rig.owns_in("paused");
    let r = rig.sbx(&["--json", "start", ID]);
    assert_eq!(r.code, 1);
    let e = json(&r.stderr);
    assert_eq!(
        (e["error"]["kind"].as_str(), e["error"]["hint"].as_str()),
        (Some("wrong_state"), Some(&*format!("`sbx resume {ID}` thaws it")))
    );
    rig.fake.push(Output::fail(1, MISSING));
    let r = rig.sbx(&["pause", ID]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.starts_with(&format!("sbx: error: no sandbox {ID}")), "{}", r.stderr);
    assert_eq!(rig.fake.verbs(), ["container inspect"; 3], "refused on the inspect, nothing changed");
    assert!(rig.fake.calls().iter().all(|c| c.last().unwrap() == ID), "{:?}", rig.fake.calls());
}
