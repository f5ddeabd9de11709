use super::*;
use crate::error::HostError;

/// A state dir of the test's own, removed when the test ends.
struct Tmp(State);

impl std::ops::Deref for Tmp {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0.dir);
    }
}

fn tmp() -> Tmp {
    let d = std::env::temp_dir().join(format!("sbx-state-{}-{:x}", std::process::id(), rand::random::<u64>()));
    std::fs::create_dir_all(&d).unwrap();
    Tmp(State::at(d))
}

#[test]
fn key_is_made_once_and_tokens_depend_on_it() {
    let s = tmp();
    let k1 = s.key().unwrap();
    assert_eq!(s.key().unwrap(), k1);
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(s.dir.join("key")).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let t = owner_token(&k1, "sbx-0123456789ab");
    assert_eq!(t.len(), 32);
    assert_eq!(t, owner_token(&k1, "sbx-0123456789ab"));
    assert_ne!(t, owner_token(&k1, "sbx-0123456789ac"));
    assert_ne!(t, owner_token(&[7u8; 32], "sbx-0123456789ab"));
    std::fs::remove_dir_all(&s.dir).unwrap();
}

#[test]
fn concurrent_first_runs_agree_on_one_key() {
    let s = tmp();
    let keys: Vec<Vec<u8>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..8).map(|_| sc.spawn(|| s.key().unwrap())).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(keys.windows(2).all(|w| w[0] == w[1]));
    std::fs::remove_dir_all(&s.dir).unwrap();
}

#[test]
fn expiry_creating_and_forget() {
    let s = tmp();
    let id = "sbx-0123456789ab";
    let at = humantime::parse_rfc3339("2026-11-29T10:00:00Z").unwrap();
    s.set_expiry(id, at).unwrap();
    assert_eq!(s.expiry(id), Some(at));
    assert_eq!(s.expiring(), vec![id.to_string()]);
    let me = ProcId::current().unwrap();
    assert!(me.is_alive());
    s.begin_create(id, me).unwrap();
    assert_eq!(s.creating(), vec![Creating { id: id.to_string(), by: Some(me) }]);
    let reused = ProcId { pid: me.pid, start: me.start + 1 };
    assert!(!reused.is_alive(), "same pid, other start time: not the same process");
    s.forget(id);
    assert!(s.expiry(id).is_none() && s.creating().is_empty());
    std::fs::remove_dir_all(&s.dir).unwrap();
}

#[test]
fn start_time_survives_odd_command_names() {
    let stat = "123 (a) b (c)) S 1 123 123 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 200";
    assert_eq!(parse_start_time(stat), Some(98765));
    assert_eq!(parse_start_time("garbage"), None);
}

#[test]
fn candidates_prefer_explicit_then_system_then_user() {
    let c = StateChoice { explicit: None, xdg_state_home: Some("/x".into()), home: Some("/h".into()), euid: 0 };
    assert_eq!(c.candidates(), vec![PathBuf::from("/var/lib/sbx"), "/x/sbx".into(), "/h/.local/state/sbx".into()]);
    let c = StateChoice { euid: 1000, ..c };
    assert_eq!(c.candidates()[0], PathBuf::from("/x/sbx"));
    let c = StateChoice { explicit: Some("/e".into()), ..c };
    assert_eq!(c.candidates(), vec![PathBuf::from("/e")]);
}

/// The errors that were `Error::Host(HostError::Io)` with made-up sources say, and are
/// classed, exactly as before.
#[test]
fn former_io_errors_keep_their_text_kind_and_code() {
    use std::io::ErrorKind;
    let same = |new: Error, old: Error| {
        assert_eq!(new.to_string(), old.to_string());
        assert_eq!((new.kind(), new.exit_code(), new.hint()), (old.kind(), old.exit_code(), old.hint()));
    };
    let s = tmp();
    let file = s.dir.join("file");
    std::fs::write(&file, b"x").unwrap();
    let tried = format!("{} (Not a directory (os error 20))", file.join("sbx").display());
    let none = StateChoice { explicit: Some(file.join("sbx")), xdg_state_home: None, home: None, euid: 1000 };
    let err = none.resolve().unwrap_err();
    assert!(matches!(&err, Error::Host(HostError::NoStateDir { tried: t }) if *t == tried), "{err}");
    same(
        err,
        Error::io(
            format!("no usable state directory (tried: {tried}); set SBX_DATA_DIR"),
            std::io::Error::new(ErrorKind::NotFound, "no state directory"),
        ),
    );
    std::fs::write(s.dir.join("key"), b"short").unwrap();
    let err = s.key().unwrap_err();
    assert!(matches!(&err, Error::Host(HostError::BadKey { .. })), "{err}");
    same(
        err,
        Error::io(format!("{} is not a 32-byte key", s.dir.join("key").display()), ErrorKind::InvalidData.into()),
    );
    let bad = serde_json::from_str::<u8>("{").unwrap_err();
    let old = Error::io("reading the probe's report", serde_json::from_str::<u8>("{").unwrap_err().into());
    same(Error::Host(HostError::Json { context: "reading the probe's report".into(), source: bad }), old);
    let path = s.dir.join("seccomp.json");
    same(
        Error::Host(HostError::SeccompChanged { path: path.clone() }),
        Error::io(
            format!("verifying {}", path.display()),
            std::io::Error::other("the profile changed after it was written (is the data dir shared?)"),
        ),
    );
    std::fs::remove_dir_all(&s.dir).unwrap();
}

/// A record as sbx wrote it when `private` was a `Vec<(String, String)>`:
/// it still parses, and writing it back gives the same bytes.
#[test]
fn a_record_written_before_private_routes_were_named_reads_and_writes_the_same() {
    use crate::model::record::PrivateRoute;
    let s = tmp();
    let id = "sbx-0123456789ab";
    let old = format!(
        r#"{{"container":"{}","socket_dir":"/run/sbx/{id}","private":[["{id}-inference","proxy"],["{id}-db","pg"]],"volume":"sbx-state-s","session":"s"}}"#,
        "a".repeat(64)
    );
    std::fs::create_dir_all(s.dir.join("records")).unwrap();
    std::fs::write(s.dir.join("records").join(id), &old).unwrap();
    let r = s.record(id).unwrap();
    assert_eq!(
        r.private,
        [
            PrivateRoute { network: format!("{id}-inference"), service: "proxy".into() },
            PrivateRoute { network: format!("{id}-db"), service: "pg".into() },
        ]
    );
    assert_eq!((r.volume.as_deref(), r.session.as_deref()), (Some("sbx-state-s"), Some("s")));
    s.set_record(id, &r).unwrap();
    assert_eq!(std::fs::read_to_string(s.dir.join("records").join(id)).unwrap(), old);
}

#[test]
fn engine_runtimes_are_remembered_under_their_key_only() {
    let s = tmp();
    assert_eq!(s.runtimes("k1"), None);
    s.set_runtimes("k1", r#"{"runc":{"path":"runc"}}"#);
    assert_eq!(s.runtimes("k1").as_deref(), Some(r#"{"runc":{"path":"runc"}}"#));
    assert_eq!(s.runtimes("k2"), None, "another daemon.json or dockerd: asked again");
}

/// A listing's view says what each sandbox's own files say, for every
/// kind it reads, and nothing of a sandbox without files.
#[test]
fn one_view_for_all_says_what_each_sandboxs_files_say() {
    let s = tmp();
    let (a, b, c, none) = ("sbx-00000000000a", "sbx-00000000000b", "sbx-00000000000c", "sbx-00000000000d");
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(2_000_000_000);
    s.set_expiry(a, at).unwrap();
    s.mark_stopped_run(a, "2026-12-04T10:00:00Z").unwrap();
    s.mark(b, Mark::Hibernated).unwrap();
    s.mark(b, Mark::Stopped).unwrap();
    let claim = Claim { pool: "p".into(), session: Some("s1".into()), pid: 1, start: 2, complete: true };
    s.set_claim(c, &claim).unwrap();
    let all = s.view();
    for id in [a, b, c, none] {
        let one = s.view_of(id);
        assert_eq!(all.expiry(id), one.expiry(id), "{id}");
        assert_eq!(all.hibernated(id), one.hibernated(id), "{id}");
        assert_eq!(all.stopped_run(id), one.stopped_run(id), "{id}");
        for run in [None, Some("2026-12-04T10:00:00Z"), Some("2026-12-04T11:00:00Z")] {
            assert_eq!(all.stopped_by_sbx(id, run), s.stopped_by_sbx(id, run), "{id} {run:?}");
        }
        assert_eq!(all.claimed_session(id), one.claimed_session(id), "{id}");
    }
    assert_eq!(all.expiry(a), Some(at));
    assert_eq!(all.stopped_run(a), Some("2026-12-04T10:00:00Z"));
    assert!(!all.stopped_by_sbx(a, Some("2026-12-04T11:00:00Z")), "a mark of another run is stale");
    assert!(all.hibernated(b) && all.stopped_by_sbx(b, Some("any")), "an empty mark holds");
    assert_eq!(all.claimed_session(c), Some(Some("s1")));
    assert_eq!((all.expiry(none), all.hibernated(none), all.claimed_session(none)), (None, false, None));
    std::fs::remove_dir_all(&s.dir).unwrap();
}
