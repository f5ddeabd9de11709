use super::*;
use proptest::prelude::*;

fn n(raw: &str) -> Result<String, String> {
    normal_path(raw).map(|(p, _)| p)
}

#[test]
fn normal_paths_resolve_dots_and_decode_unreserved_escapes() {
    for (raw, want) in [
        ("/", "/"),
        ("/a/b", "/a/b"),
        ("/a/b/", "/a/b/"),
        ("/a/./b", "/a/b"),
        ("/a/b/..", "/a/"),
        ("/a/b/../c", "/a/c"),
        ("/a/%2e%2e/c", "/c"),
        ("/a/%2E/c", "/a/c"),
        ("/%61%7E%2D", "/a~-"),
        ("/a%3ab", "/a%3Ab"),
        ("/a%20b", "/a%20b"),
        ("/org/repo.git/info/refs", "/org/repo.git/info/refs"),
        ("/a:b@c!$&'()*+,=", "/a:b@c!$&'()*+,="),
    ] {
        assert_eq!(n(raw).as_deref(), Ok(want), "{raw}");
    }
    assert_eq!(normal_path("/a/../b?x=1&y=/../").unwrap(), ("/b".into(), Some("x=1&y=/../".into())));
}

#[test]
fn non_normal_paths_are_refused() {
    for raw in [
        "",
        "a",
        "*",
        "/a/%2f/b",
        "/a%2F",
        "/a%5cb",
        "/a\\b",
        "/a%00",
        "/a\0",
        "/a%0a",
        "/a%7f",
        "/%",
        "/%4",
        "/%zz",
        "/a//b",
        "//a",
        "/..",
        "/a/../..",
        "/%2e%2e/x",
        "/a#f",
        "/a b",
        "/a\"",
        "/a<b",
        "/a{b}",
        "/é",
        "/a?b#c",
        // Path parameters: Tomcat and Spring drop `;...` from a segment, so
        // `/a/..;/b` is their `/b`, and `/a;x/b` their `/a/b`.
        "/a/..;/b",
        "/a/.;/b",
        "/a/%2e%2e;/b",
        "/a/..;x=1/b",
        "/a;x/b",
        "/a%3b/..",
        "/a/..%3B/b",
        "/a;",
    ] {
        assert!(normal_path(raw).is_err(), "{raw:?}: {:?}", normal_path(raw));
    }
}

#[test]
fn rules_parse_methods_and_normal_paths() {
    let r = RequestRule::parse("get,Post", "/org/repo.git/").unwrap();
    assert_eq!(r.methods, ["GET", "POST"]);
    assert_eq!(r.to_string(), "GET,POST /org/repo.git/");
    for (m, p) in [
        ("", "/a"),
        ("*", "/a"),
        ("GET,", "/a"),
        ("G ET", "/a"),
        ("GET", "a"),
        ("GET", "/a/../b"),
        ("GET", "/a%2fb"),
        ("GET", "/a?x"),
        ("GET", "/%7e"),
    ] {
        assert!(RequestRule::parse(m, p).is_err(), "{m} {p}");
    }
}

#[test]
fn prefixes_stop_at_segment_boundaries_and_globs_match_whole_paths() {
    let r = RequestRule::parse("GET", "/a/b").unwrap();
    assert!(r.matches("GET", "/a/b") && r.matches("GET", "/a/b/") && r.matches("GET", "/a/b/c"));
    assert!(!r.matches("GET", "/a/bc") && !r.matches("GET", "/a") && !r.matches("POST", "/a/b"));
    let dir = RequestRule::parse("GET", "/a/").unwrap();
    assert!(dir.matches("GET", "/a/x") && !dir.matches("GET", "/a"));
    let g = RequestRule::parse("GET", "/org/*/info/refs").unwrap();
    assert!(g.matches("GET", "/org/repo.git/info/refs"));
    assert!(!g.matches("GET", "/org/a/b/info/refs") && !g.matches("GET", "/org/repo.git/info/refs/x"));
    let tail = RequestRule::parse("GET", "/v1/*").unwrap();
    assert!(tail.matches("GET", "/v1/models") && !tail.matches("GET", "/v1/a/b"));
}

#[test]
fn the_git_rules_allow_a_clone_and_refuse_a_push() {
    let rules = [
        RequestRule::parse("GET", "/org/repo.git/info/refs").unwrap(),
        RequestRule::parse("POST", "/org/repo.git/git-upload-pack").unwrap(),
    ];
    let allowed = |m: &str, target: &str| {
        let (path, _) = normal_path(target).unwrap();
        rules.iter().any(|r| r.matches(m, &path))
    };
    assert!(allowed("GET", "/org/repo.git/info/refs?service=git-upload-pack"));
    assert!(allowed("POST", "/org/repo.git/git-upload-pack"));
    assert!(!allowed("GET", "/org/repo.git/info/refs/../../other.git/info/refs"));
    assert!(!allowed("POST", "/org/repo.git/git-receive-pack"));
    assert!(!allowed("POST", "/org/repo.git/git-upload-pack/../git-receive-pack"));
    assert!(!allowed("GET", "/org/repo.git/git-upload-pack"));
    assert!(normal_path("/org/repo.git/info/refs/..;/../git-receive-pack").is_err());
    // The query is no path: a `;` there is the upstream's business.
    assert!(allowed("GET", "/org/repo.git/info/refs?a=1;b=2"));
}

proptest! {
    #[test]
    fn a_normal_path_is_a_fixed_point_and_holds_no_trick(raw in "/[a-z./%25fFeE2c0-9~_-]{0,24}") {
        if let Ok((p, None)) = normal_path(&raw) {
            prop_assert_eq!(n(&p), Ok(p.clone()));
            prop_assert!(p.starts_with('/'));
            for bad in ["//", "/./", "/../", "%2F", "%2f", "%2E", "%2e", "%5C"] {
                prop_assert!(!p.contains(bad), "{} -> {}", raw, p);
            }
            prop_assert!(!p.ends_with("/.") && !p.ends_with("/.."));
        }
    }
}

/// With backtracking, each `*` multiplies the work by the path's length:
/// this pair took seconds, a longer path hours.
#[test]
fn a_glob_matches_in_linear_time() {
    let r = RequestRule::parse("GET", "/a*a*a*a*b").unwrap();
    for n in [300, 60_000] {
        let path = format!("/{}", "a".repeat(n));
        let start = std::time::Instant::now();
        assert!(!r.matches("GET", &path));
        assert!(r.matches("GET", &format!("{path}b")));
        assert!(start.elapsed() < std::time::Duration::from_millis(200), "{n}: {:?}", start.elapsed());
    }
}

#[test]
fn globs_match_like_a_backtracking_matcher() {
    let cases = [
        ("/*", "/", true),
        ("/*", "/abc", true),
        ("/*", "/a/b", false),
        ("/a*", "/a", true),
        ("/a*b", "/ab", true),
        ("/a*b", "/axxb", true),
        ("/a*b", "/axxbx", false),
        ("/a*b*c", "/abbc", true),
        ("/a*b*c", "/acb", false),
        ("/*b*", "/abc", true),
        ("/*/x/*", "/a/x/b", true),
        ("/*/x/*", "/a/b/x/c", false),
        ("/*.git/info/refs", "/repo.git/info/refs", true),
        ("/*.git/info/refs", "/repo.git/x/info/refs", false),
        ("/ab*ba", "/aba", false),
        ("/ab*ba", "/abba", true),
        ("/a**b", "/ab", true),
        ("/*/", "/a/", true),
        ("/*/", "/a", false),
    ];
    for (pat, path, want) in cases {
        let r = RequestRule::parse("GET", pat).unwrap();
        assert_eq!(r.matches("GET", path), want, "{pat} {path}");
    }
}

/// The backtracking matcher the linear one replaced, as the reference.
fn backtracking(pat: &[u8], s: &[u8]) -> bool {
    match pat.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => {
            (0..=s.len()).take_while(|&i| i == 0 || s[i - 1] != b'/').any(|i| backtracking(rest, &s[i..]))
        }
        Some((c, rest)) => s.first() == Some(c) && backtracking(rest, &s[1..]),
    }
}

proptest! {
    #[test]
    fn the_linear_glob_agrees_with_backtracking(pat in "/[ab*/]{0,8}", path in "/[ab/]{0,12}") {
        prop_assert_eq!(glob(pat.as_bytes(), path.as_bytes()), backtracking(pat.as_bytes(), path.as_bytes()), "{} {}", pat, path);
    }
}
