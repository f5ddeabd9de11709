use super::*;
use crate::model::ids::SBX_UID_BASE;

fn table() -> Table {
    Table::at(std::env::temp_dir().join(format!("sbx-uids-{}-{}", std::process::id(), rand::random::<u64>())))
}

const NONE: Refuse = &|_| false;

#[test]
fn claims_differ_a_holder_keeps_its_uid_and_release_frees_it() {
    let t = table();
    let data = Path::new("/nonexistent/a");
    let p = Place { engine: "unix:///e", data };
    let (a, fresh) = t.claim(&p, Holder::Sandbox("a".into()), 5, NONE).unwrap();
    assert_eq!((a, fresh), (SBX_UID_BASE + 5, true));
    // The same start: the next free one; the same holder: its own again.
    assert_eq!(t.claim(&p, Holder::Sandbox("b".into()), 5, NONE).unwrap(), (SBX_UID_BASE + 6, true));
    assert_eq!(t.claim(&p, Holder::Sandbox("a".into()), 99, NONE).unwrap(), (a, false));
    // Another data dir's sandbox of the same name is another holder.
    let q = Place { engine: "unix:///e", data: Path::new("/nonexistent/b") };
    assert_eq!(t.claim(&q, Holder::Sandbox("a".into()), 5, NONE).unwrap(), (SBX_UID_BASE + 7, true));
    t.release(&p, &[Holder::Sandbox("a".into())]).unwrap();
    assert_eq!(t.claim(&p, Holder::Service("c".into()), 5, NONE).unwrap(), (SBX_UID_BASE + 5, true));
    fs::remove_dir_all(&t.dir).unwrap();
}

#[test]
fn a_refused_id_is_skipped_and_the_start_wraps_inside_the_range() {
    let t = table();
    let p = Place { engine: "e", data: Path::new("/x") };
    let refuse: Refuse = &|u| u == SBX_UID_BASE + SBX_UID_COUNT - 1;
    let (u, _) = t.claim(&p, Holder::Sandbox("a".into()), u32::MAX, refuse).unwrap();
    // u32::MAX % 2^24 is the range's last id, refused: the first follows.
    assert_eq!(u, SBX_UID_BASE);
    fs::remove_dir_all(&t.dir).unwrap();
}

#[test]
fn prune_keeps_the_live_the_creating_and_sessions_with_a_data_dir() {
    let t = table();
    let dir = t.dir.join("data");
    fs::create_dir_all(&dir).unwrap();
    let p = Place { engine: "e", data: &dir };
    let gone_dir = Place { engine: "e", data: Path::new("/nonexistent/gone") };
    let other_engine = Place { engine: "f", data: Path::new("/nonexistent/gone") };
    let claim = |p: &Place, h: Holder| t.claim(p, h, 0, NONE).unwrap().0;
    let live = claim(&p, Holder::Sandbox("live".into()));
    let gate = claim(&p, Holder::Service("live".into()));
    let dead = claim(&p, Holder::Sandbox("dead".into()));
    let creating = claim(&p, Holder::Sandbox("creating".into()));
    let session = claim(&p, Holder::Session("s".into()));
    let orphan = claim(&gone_dir, Holder::Session("s".into()));
    let elsewhere = claim(&other_engine, Holder::Sandbox("x".into()));
    let me = ProcId::current().unwrap();
    let listed = [
        Live { name: "live".into(), uid: Some(live) },
        Live { name: "lost".into(), uid: Some(SBX_UID_BASE + 1000) },
        Live { name: "plain".into(), uid: Some(65534) },
    ];
    // Every entry was written by this process: only "creating"'s creator lives.
    let (_l, mut entries) = t.locked().unwrap();
    for e in &mut entries {
        e.by = (e.holder == Holder::Sandbox("creating".into())).then_some(me);
    }
    t.save(&entries).unwrap();
    drop(_l);
    t.prune(&p, &listed, &|p| p.is_alive()).unwrap();
    let (_l, entries) = t.locked().unwrap();
    let uids: Vec<u32> = entries.iter().map(|e| e.uid).collect();
    assert_eq!(uids, [live, gate, creating, session, elsewhere, SBX_UID_BASE + 1000], "dead {dead}, orphan {orphan}");
    assert_eq!(entries[5].holder, Holder::Sandbox("lost".into()));
    drop(_l);
    fs::remove_dir_all(&t.dir).unwrap();
}
