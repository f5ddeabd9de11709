//! Create's pull through the fake: only a `repo@sha256:D` the engine lacks
//! is pulled, never an image id, never under `--pull never`; a failed pull
//! is said in sbx's words with docker's reason, and nothing is made.

use super::*;
use crate::docker::parse::PullFailure;
use crate::docker::ModeKind;
use crate::error::ImageError;
use crate::spec::PullPolicy;

const D: &str = "sha256:bb3c058da4cf23ef87ef0f2e0710d7bf59f4d72d576f9820499145b69000f568";
const MISSING: &str = "Error response from daemon: no such image: x: No such image: x";

fn repo_img() -> String {
    format!("127.0.0.1:5917/sbxprobe/x@{D}")
}

fn pinned(pull: Option<PullPolicy>) -> SandboxSpec {
    SandboxSpec::from_request(&CreateRequest { image: repo_img(), pull, ..Default::default() }, None).unwrap()
}

/// The engine lacks [`repo_img`], pulls it, then lists it under its digest.
fn pulls_fine(rig: &Rig) {
    rig.fake.push(Output::fail(1, MISSING));
    rig.fake.push(Output::ok(&pull_output()));
    rig.fake.push(Output::ok(&format!("[\"{}\"]\n", repo_img())));
}

/// `docker pull` of [`repo_img`] with stdout a pipe, as engine 20.10 prints it.
fn pull_output() -> String {
    let r = repo_img();
    format!(
        "{r}: Pulling from sbxprobe/x\n126baed972e6: Pulling fs layer\n126baed972e6: Download complete\n\
         126baed972e6: Pull complete\nDigest: {D}\nStatus: Downloaded newer image for {r}\n{r}\n"
    )
}

#[test]
fn a_missing_repo_digest_is_pulled_verified_and_then_run() {
    let rig = Rig::new();
    pulls_fine(&rig);
    rig.image("1000");
    rig.starts_and_binds();
    let c = rig.driver().create(&pinned(None)).unwrap();
    assert_eq!(c.record.user, USER);
    assert_eq!(
        rig.fake.verbs(),
        ["image inspect", "pull", "image inspect", "image inspect", "run", "container inspect"]
    );
    let calls = rig.fake.invocations();
    assert_eq!(calls[1].args, ["pull", "--", &repo_img()]);
    // Streamed: docker's output is read by sbx, never passed to its stdout.
    assert_eq!(calls[1].mode, ModeKind::Streamed);
    assert_eq!(calls[2].args, ["image", "inspect", "--format", "{{json .RepoDigests}}", "--", &repo_img()]);
    assert!(calls[4].args.windows(2).any(|w| w[0] == "--pull" && w[1] == "never"), "docker never pulls on its own");
}

#[test]
fn the_pull_shows_layer_progress_on_a_terminal_and_nothing_on_stdout() {
    let run = |tty: bool| {
        let rig = Rig::new();
        pulls_fine(&rig);
        rig.image("1000");
        rig.starts_and_binds();
        let (p, c) = crate::output::capture(false);
        p.with_progress(tty).scope(|| rig.driver().create(&pinned(None))).unwrap();
        assert_eq!(c.stdout(), "", "docker pull's output never reaches stdout");
        let verbs = ["image inspect", "pull", "image inspect", "image inspect", "run", "container inspect"];
        assert_eq!(rig.fake.verbs(), verbs, "the same calls, terminal or not");
        assert_eq!(rig.fake.calls()[1], ["pull", "--", &repo_img()]);
        c.stderr()
    };
    let shown = run(true);
    let lines: Vec<&str> = shown.split("\r\x1b[2K").filter(|l| !l.is_empty()).collect();
    let img = repo_img();
    assert_eq!(
        lines,
        [
            format!("sbx: pulling {img}").chars().take(77).collect::<String>() + "…",
            format!("sbx: 0/1 layers, pulling {img}").chars().take(77).collect::<String>() + "…",
            format!("sbx: 1/1 layers, pulling {img}").chars().take(77).collect::<String>() + "…",
        ]
    );
    assert!(shown.ends_with("\r\x1b[2K"), "the line is cleared at the end: {shown:?}");
    assert_eq!(run(false), "", "not a terminal: silent");
}

#[test]
fn an_image_id_and_pull_never_are_not_pulled() {
    // An image id names content on one engine only.
    let rig = Rig::new();
    rig.fake.push(Output::fail(1, MISSING));
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(&err, Error::Image(ImageError::Missing { image }) if image == IMG), "{err:?}");
    assert!(err.hint().unwrap().contains("image id"), "{:?}", err.hint());
    assert_eq!(rig.fake.verbs(), ["image inspect"]);
    // `--pull never`: today's error, naming the pull to run.
    let rig = Rig::new();
    rig.fake.push(Output::fail(1, MISSING));
    let err = rig.driver().create(&pinned(Some(PullPolicy::Never))).unwrap_err();
    assert!(matches!(&err, Error::Image(ImageError::Missing { .. })), "{err:?}");
    assert!(err.hint().unwrap().contains(&format!("`docker pull {}`", repo_img())), "{:?}", err.hint());
    assert_eq!((err.exit_code(), rig.fake.verbs()), (1, vec!["image inspect".to_string()]));
    assert!(!rig.sock_dir().exists());
}

#[test]
fn a_failed_pull_says_why_and_makes_nothing() {
    let samples = [
        (
            format!("Error response from daemon: manifest for {} not found: manifest unknown: manifest unknown", repo_img()),
            PullFailure::NotFound,
            "docker manifest inspect",
        ),
        (
            format!("Error response from daemon: Get \"http://127.0.0.1:5917/v2/sbxprobe/x/manifests/{D}\": no basic auth credentials"),
            PullFailure::Denied,
            "docker login 127.0.0.1:5917",
        ),
        (
            "Error response from daemon: Get \"http://127.0.0.1:5917/v2/\": dial tcp 127.0.0.1:5917: connect: connection refused".into(),
            PullFailure::Unreachable,
            "registry 127.0.0.1:5917 is up",
        ),
    ];
    for (stderr, want, hint) in samples {
        let rig = Rig::new();
        rig.fake.push(Output::fail(1, MISSING));
        rig.fake.push(Output::fail(1, &stderr));
        let err = rig.driver().create(&pinned(None)).unwrap_err();
        match &err {
            Error::Image(ImageError::PullFailed { image, why, reason }) => {
                assert_eq!((image.as_str(), *why), (repo_img().as_str(), want));
                assert!(!reason.starts_with("Error response"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("could not pull image {}: ", repo_img())) && text.contains("(docker: \""),
            "{text}"
        );
        assert!(
            err.hint().unwrap().contains(hint) && err.hint().unwrap().contains("nothing was created"),
            "{:?}",
            err.hint()
        );
        assert_eq!((err.kind(), err.exit_code()), ("pull_failed", 1));
        assert_eq!(rig.fake.verbs(), ["image inspect", "pull"], "nothing made, nothing to undo");
        assert!(!rig.sock_dir().exists());
    }
}

#[test]
fn a_pull_past_its_deadline_or_not_listed_under_its_digest_is_refused() {
    let rig = Rig::new();
    rig.fake.push(Output::fail(1, MISSING));
    rig.fake.push_timeout(Duration::from_secs(600));
    let err = rig.driver().create(&pinned(None)).unwrap_err();
    assert!(matches!(err, Error::Image(ImageError::PullTimedOut { .. })), "{err:?}");
    assert!(err.to_string().contains("10m") && err.hint().unwrap().contains("SBX_PULL_TIMEOUT"));
    assert_eq!(rig.fake.verbs(), ["image inspect", "pull"]);

    let rig = Rig::new();
    rig.fake.push(Output::fail(1, MISSING));
    rig.fake.push(Output::ok(&pull_output()));
    rig.fake.push(Output::ok("[\"127.0.0.1:5917/sbxprobe/other@sha256:00\"]\n"));
    let err = rig.driver().create(&pinned(None)).unwrap_err();
    assert!(matches!(err, Error::Image(ImageError::PullUnverified { .. })), "{err:?}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "pull", "image inspect"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn ctrl_c_during_the_pull_ends_the_create_with_nothing_made() {
    let rig = Rig::new();
    rig.fake.push(Output::fail(1, MISSING));
    // The runner killed the pull (status 137) because a signal is pending.
    rig.fake.push(Output::fail(137, ""));
    let asked = Arc::new(AtomicUsize::new(0));
    let seen = asked.clone();
    // Pending from the third check on: the one right after the pull.
    let d = rig.driver().with_interrupts(Arc::new(move || (seen.fetch_add(1, Ordering::SeqCst) >= 2).then_some(2)));
    let err = d.create(&pinned(None)).unwrap_err();
    assert!(matches!(err, Error::Interrupted { signal: 2 }), "{err:?}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "pull"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn a_cached_image_removed_since_is_pulled_on_a_second_try() {
    let rig = Rig::new();
    rig.image("1000");
    rig.starts_and_binds();
    rig.driver().create(&pinned(None)).unwrap();
    socket::remove_dir(&rig.sock_dir(), ID).unwrap();
    // Removed from the engine since: docker run (--pull never) says so,
    // the first try is undone, the second pulls before anything exists.
    rig.fake.push(Output::fail(125, &format!("Error response from daemon: No such image: {}", repo_img())));
    rig.removed();
    pulls_fine(&rig);
    rig.image("1000");
    rig.starts_and_binds();
    rig.driver().create(&pinned(None)).unwrap();
    assert_eq!(
        rig.fake.verbs()[3..],
        ["run", "rm", "image inspect", "pull", "image inspect", "image inspect", "run", "container inspect"]
    );
}
