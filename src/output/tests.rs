use super::*;

#[test]
fn json_messages_are_one_object_per_line() {
    let line = render("warning", "tier_lowered", "a \"quoted\"\nmessage", true);
    assert!(!line.contains('\n'));
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["warning"]["kind"], "tier_lowered");
    assert_eq!(v["warning"]["message"], "a \"quoted\"\nmessage");
    assert_eq!(render("warning", "k", "m", false), "sbx: warning: m");
    assert_eq!(render("note", "k", "m", false), "sbx: m");
}

#[test]
fn data_goes_to_stdout_and_messages_to_stderr() {
    let (p, c) = capture(false);
    p.data("one\n").unwrap();
    p.json_line(&serde_json::json!({"a": 1})).unwrap();
    p.warn("k", "careful\x1b[2J");
    p.note("k", "progress");
    assert_eq!(c.stdout(), "one\n{\"a\":1}\n");
    assert_eq!(c.stderr(), "sbx: warning: careful\\u{1b}[2J\nsbx: progress\n");
}

#[test]
fn errors_with_hints_in_text_and_json() {
    let e = Error::from(crate::error::Invalid::new("sandbox id", "x", "ids look like sbx-0123456789ab").hint("sbx ls"));
    let (p, c) = capture(false);
    p.error(&e);
    assert_eq!(c.stderr(), "sbx: error: invalid sandbox id \"x\": ids look like sbx-0123456789ab\nsbx: hint: sbx ls\n");
    let (p, c) = capture(true);
    p.error(&e);
    assert_eq!(
        c.stderr(),
        "{\"error\":{\"hint\":\"sbx ls\",\"kind\":\"invalid_input\",\
         \"message\":\"invalid sandbox id \\\"x\\\": ids look like sbx-0123456789ab\"}}\n"
    );
    assert_eq!(c.stdout(), "");
}

#[test]
fn library_warnings_reach_the_scoped_printer() {
    let (p, c) = capture(true);
    p.scope(|| warn("cleanup", "could not remove x"));
    assert_eq!(c.stderr(), "{\"warning\":{\"kind\":\"cleanup\",\"message\":\"could not remove x\"}}\n");
    // Outside the scope it no longer goes there.
    CURRENT.with(|cur| assert!(cur.borrow().is_none()));
}

#[test]
fn progress_only_on_a_terminal_and_cleared_before_messages_and_at_the_end() {
    // Not a terminal (capture's default), or --json: nothing at all.
    for json in [false, true] {
        let (p, c) = capture(json);
        let mut bar = p.progress();
        bar.update("pulling x: 1/2 layers");
        drop(bar);
        assert_eq!(c.stderr(), "");
    }
    let (p, c) = capture(false);
    let p = p.with_progress(true);
    let mut bar = p.progress();
    bar.update("pulling x: 1/2 layers");
    bar.update("pulling x: 1/2 layers");
    p.warn("k", "careful");
    bar.update("pulling x: 2/2 layers\x1b[2J");
    drop(bar);
    assert_eq!(
        c.stderr(),
        "\r\x1b[2Ksbx: pulling x: 1/2 layers\r\x1b[2Ksbx: warning: careful\n\
         \r\x1b[2Ksbx: pulling x: 2/2 layers\\u{1b}[2J\r\x1b[2K"
    );
    assert_eq!(c.stdout(), "");
    let long = progress::line(&"y".repeat(200));
    assert_eq!(long.chars().count(), "\r\x1b[2K".len() + 78);
}
