//! The lifecycle cases: `sbx stop`, `sbx start` (until the
//! socket is bound again) and a `pause` + `resume` round trip, each beside
//! the bare docker commands on a sandbox of the same argv (sbx's own
//! builder), interleaved in one run. Stops use no grace on both sides: the
//! fixture, as PID 1, ignores SIGTERM, so a grace would measure itself.

use super::{docker_ok, timed, wait_for, Bench, Case};

pub fn run(b: &Bench, reps: &dyn Fn(usize) -> usize, cases: &mut Vec<Case>) {
    let id = b.create(&[]);
    let (name, dir) = b.bare_create(&[]);
    let sock = dir.join("sandbox.sock");
    let mut stop = Case { name: "stop (no grace)".into(), target: Some(1.10), ..Default::default() };
    let mut start = Case { name: "start-to-ready".into(), target: Some(1.10), ..Default::default() };
    let mut pause = Case { name: "pause + resume".into(), target: Some(1.10), ..Default::default() };
    for i in 0..reps(10) {
        let sbx_first = i % 2 == 0;
        for which in [sbx_first, !sbx_first] {
            if which {
                stop.sbx_ms.push(timed(|| b.sbx(&["stop", "--grace", "0s", &id])).1);
                start.sbx_ms.push(timed(|| b.sbx(&["start", &id])).1);
                pause.sbx_ms.push(timed(|| (b.sbx(&["pause", &id]), b.sbx(&["resume", &id]))).1);
            } else {
                stop.bare_ms.push(timed(|| docker_ok(&["stop", "--time", "0", &name])).1);
                // What sbx start must do too: the last run's socket goes first.
                let (_, t) = timed(|| {
                    let _ = std::fs::remove_file(&sock);
                    docker_ok(&["start", &name]);
                    wait_for(&sock);
                });
                start.bare_ms.push(t);
                pause.bare_ms.push(timed(|| (docker_ok(&["pause", &name]), docker_ok(&["unpause", &name]))).1);
            }
        }
        eprint!(".");
    }
    b.sbx(&["destroy", &id]);
    b.bare_destroy(&name, &dir);
    cases.extend([stop, start, pause]);
}
