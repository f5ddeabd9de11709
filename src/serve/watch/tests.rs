use serde_json::json;

use super::super::watch_events::*;
use super::*;
use crate::workbench::lines::RelPath;
use crate::workbench::lines::{Change, WatchLine};
use crate::workbench::WatchEnd;

fn rel(parts: &[&[u8]]) -> RelPath {
    RelPath(parts.iter().map(|p| p.to_vec()).collect())
}

#[test]
fn the_four_calls_are_routed_and_nothing_else() {
    assert_eq!(Call::of("/filesystem.Filesystem/WatchDir"), Some(Call::WatchDir));
    assert_eq!(Call::of("/filesystem.Filesystem/CreateWatcher"), Some(Call::CreateWatcher));
    assert_eq!(Call::of("/filesystem.Filesystem/GetWatcherEvents"), Some(Call::GetWatcherEvents));
    assert_eq!(Call::of("/filesystem.Filesystem/RemoveWatcher"), Some(Call::RemoveWatcher));
    for other in ["/filesystem.Filesystem/Stat", "/filesystem.Filesystem/watchdir", "/process.Process/WatchDir"] {
        assert_eq!(Call::of(other), None, "{other}");
    }
}

#[test]
fn a_watch_request_is_checked() {
    let ok = |path: &str, recursive| Ok(Asked { path: path.into(), recursive });
    assert_eq!(parse(&json!({"path": "/tmp//w/"})), ok("/tmp/w", false));
    assert_eq!(parse(&json!({"path": "/tmp/w", "recursive": true})), ok("/tmp/w", true));
    assert_eq!(parse(&json!({"path": "/", "includeEntry": false, "allowNetworkMounts": false})), ok("/", false));
    for (msg, why) in [
        (json!({}), "path is required"),
        (json!({"path": "tmp"}), "absolute"),
        (json!({"path": "/a/../b"}), "'..'"),
        (json!({"path": "/a", "recursive": "yes"}), "not a boolean"),
        (json!({"path": "/a", "includeEntry": true}), "include_entry is not supported"),
        (json!({"path": "/a", "include_entry": true}), "include_entry is not supported"),
        (json!({"path": "/a", "allowNetworkMounts": true}), "allow_network_mounts is not supported"),
    ] {
        let (code, m) = parse(&msg).unwrap_err();
        assert_eq!(code, "invalid_argument");
        assert!(m.contains(why), "{msg}: {m}");
    }
}

#[test]
fn events_are_envds_with_names_relative_and_valid_json_whatever_their_bytes() {
    let ch = |change, path| WatchLine::Changed { change, dir: false, path };
    let hostile = rel(&[b"d", b"a\nb\x1b[31m\xff"]);
    let got = events_of(&ch(Change::Created, hostile.clone())).unwrap();
    assert_eq!(got, vec![json!({"name": "d/a\nb\u{1b}[31m\u{fffd}", "type": "EVENT_TYPE_CREATE"})]);
    let wire = serde_json::to_string(&got[0]).unwrap();
    assert!(!wire.contains('\n') && !wire.contains('\u{1b}'), "escaped on the wire: {wire}");
    assert_eq!(serde_json::from_str::<Value>(&wire).unwrap(), got[0]);
    let t = |c| events_of(&ch(c, rel(&[b"f"]))).unwrap()[0]["type"].clone();
    assert_eq!(
        [t(Change::Modified), t(Change::Deleted), t(Change::Attrib)],
        ["EVENT_TYPE_WRITE", "EVENT_TYPE_REMOVE", "EVENT_TYPE_CHMOD"]
    );
    // A rename is fsnotify's: RENAME of the old name, CREATE of the new.
    let mv = WatchLine::Moved { from: rel(&[b"a"]), to: rel(&[b"s", b"b"]) };
    assert_eq!(
        events_of(&mv).unwrap(),
        vec![json!({"name": "a", "type": "EVENT_TYPE_RENAME"}), json!({"name": "s/b", "type": "EVENT_TYPE_CREATE"})]
    );
    assert_eq!(events_of(&WatchLine::Gone).unwrap(), vec![json!({"name": ".", "type": "EVENT_TYPE_REMOVE"})]);
    for none in [WatchLine::Ready, WatchLine::Overflow, WatchLine::Limit(rel(&[b"x"]))] {
        assert_eq!(events_of(&none), None, "{none:?}");
    }
    assert_eq!(events_of(&WatchLine::Unreadable { path: rel(&[b"x"]), errno: 13 }), None);
}

#[test]
fn lost_events_and_the_watch_limit_end_a_watch_in_words() {
    let (code, m) = fatal(&WatchLine::Overflow, "/tmp/w").unwrap();
    assert_eq!(code, "data_loss");
    assert!(m.contains("/tmp/w") && m.contains("lost"), "{m}");
    let (code, m) = fatal(&WatchLine::Limit(rel(&[b"deep\n"])), "/tmp/w").unwrap();
    assert_eq!(code, "resource_exhausted");
    assert!(m.contains("/tmp/w/deep\n") && m.contains("max_user_watches"), "{m}");
    assert_eq!(fatal(&WatchLine::Ready, "/"), None);
}

#[test]
fn how_a_watch_ended_is_a_clean_end_or_the_sdks_error() {
    assert_eq!(end_of("sbx-a", Ok(WatchEnd::Gone)), None);
    assert_eq!(end_of("sbx-a", Ok(WatchEnd::Signal(STOP))), None);
    let (code, m) = end_of("sbx-a", Ok(WatchEnd::SandboxEnded)).unwrap();
    // The SDK's SANDBOX_NOT_FOUND_MESSAGE: a SandboxNotRunningException.
    assert!(code == "unavailable" && m.contains("was not found"), "{m}");
    let missing = crate::error::Explained::NoSuchPath { id: "sbx-a".into(), path: "/nothing".into() };
    assert_eq!(end_of("sbx-a", Err(missing.into())).unwrap().0, "not_found");
    let file = crate::error::Explained::NotADirectory { id: "sbx-a".into(), path: "/etc/hosts".into() };
    assert_eq!(end_of("sbx-a", Err(file.into())).unwrap().0, "invalid_argument");
    let limit = crate::error::Explained::WatchLimit { id: "sbx-a".into(), path: "/".into() };
    assert_eq!(end_of("sbx-a", Err(limit.into())).unwrap().0, "resource_exhausted");
}

#[test]
fn frames_and_keepalive_intervals() {
    let end = end_frame(Some(("not_found", "x".into())));
    assert_eq!(end[0], END_STREAM);
    assert_eq!(
        unenvelope(&[&[0u8][..], &end[1..]].concat()).unwrap(),
        json!({"error": {"code": "not_found", "message": "x"}})
    );
    assert_eq!(&end_frame(None)[..], b"\x02\x00\x00\x00\x02{}");
    let mut h = hyper::HeaderMap::new();
    assert_eq!(keepalive_of(&h), KEEPALIVE);
    for (v, want) in [("50", 50), ("0", 1), ("99999999", 3600), (" 7 ", 7)] {
        h.insert("keepalive-ping-interval", v.parse().unwrap());
        assert_eq!(keepalive_of(&h), Duration::from_secs(want), "{v}");
    }
    h.insert("keepalive-ping-interval", "soon".parse().unwrap());
    assert_eq!(keepalive_of(&h), KEEPALIVE);
}
