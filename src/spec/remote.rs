//! What `create` refuses when the engine is remote: every flag
//! that names a path on this machine, which the engine would read on its
//! own machine instead (another file, or none). Checked on the request, so
//! the refusal comes before the paths themselves are looked at here.

use super::CreateRequest;
use crate::model::engine::Engine;
use crate::model::invalid::Invalid;

/// Exit 2 when `engine` is remote and `req` names a path of this machine.
/// `--persist` is not refused: its volume is made on the engine
/// (`sandbox::shared::remote_state`); nor is `--clone` with it: it clones here and
/// copies the tree in (`sandbox::shared::remote_clone`). `--clone` without
/// `--persist` is refused, as locally without `--persist` or `--state-dir`.
pub fn refuse_host_paths(req: &CreateRequest, engine: &Engine) -> Result<(), Invalid> {
    if !engine.is_remote() {
        return Ok(());
    }
    let why = |flag: &str| {
        format!(
            "{flag} names a path on this machine, and the engine is remote ({}): it would mount whatever is at that path on its own machine",
            engine.endpoint
        )
    };
    let hint = "copy files in after create (`sbx cp PATH ID:/state/`), or run sbx on the engine's machine";
    let paths = req.ro.iter().map(|v| ("--ro", v)).chain(req.rw.iter().map(|v| ("--rw", v)));
    let paths = paths.chain(req.state_dir.iter().map(|v| ("--state-dir", v)));
    if let Some((flag, value)) = paths.into_iter().next() {
        return Err(Invalid::new(flag, value, why(flag)).hint(hint));
    }
    match &req.clone {
        Some(url) if !req.persist => Err(Invalid::new(
            "--clone",
            url,
            format!(
                "the workspace must be filled before the sandbox starts, and with a remote engine ({}) only a --persist session's is",
                engine.endpoint
            ),
        )
        .hint("add --persist (with --session)")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Req {
        #[command(flatten)]
        req: CreateRequest,
    }

    fn req(args: &[&str]) -> CreateRequest {
        Req::try_parse_from(std::iter::once("x").chain(args.iter().copied())).unwrap().req
    }

    #[test]
    fn a_remote_engine_refuses_every_path_of_this_machine_and_clones_only_into_a_persist_session() {
        let far = Engine::at("ssh://u:pw@far", None);
        for (args, what) in [
            (&["--ro", "/etc:/x", "--image", "img"][..], "--ro"),
            (&["--rw", "/srv", "--image", "img"], "--rw"),
            (&["--state-dir", "/s", "--image", "img"], "--state-dir"),
            (&["--session", "s", "--clone", "https://h/r", "--image", "img"], "--clone"),
        ] {
            let e = refuse_host_paths(&req(args), &far).unwrap_err();
            assert_eq!(e.what, what, "{args:?}");
            assert!(e.reason.contains("ssh://u@far") && !e.reason.contains("pw"), "{}", e.reason);
        }
        refuse_host_paths(&req(&["--session", "s", "--image", "img"]), &far).unwrap();
        refuse_host_paths(&req(&["--session", "s", "--persist", "--image", "img"]), &far).unwrap();
        refuse_host_paths(&req(&["--session", "s", "--persist", "--clone", "https://h/r", "--image", "img"]), &far)
            .unwrap();
        refuse_host_paths(&req(&["--ro", "/etc", "--persist", "--image", "img"]), &Engine::default_local()).unwrap();
    }
}
