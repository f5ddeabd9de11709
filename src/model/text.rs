//! Text a sandbox wrote, made safe to print as part of sbx's own messages;
//! mount points as the kernel escapes them in mountinfo.

/// Text that may carry what a sandbox or its image wrote (log tails, a
/// command's stderr, file names), made safe to print as part of sbx's own
/// message: control characters other than newline and tab (ESC, CR, BEL,
/// C1) and bidi overrides are shown escaped, so nothing reaches the
/// terminal as a control sequence, and each line after the first starts
/// with "  | ", so no line from the sandbox can pass for an `sbx:` line.
pub fn for_terminal(s: &str) -> String {
    inert_chars(s.trim_end_matches('\n')).replace('\n', "\n  | ")
}

/// `s` with every control character but newline and tab, and every bidi
/// override, written as an escape: what a sandbox wrote, safe to show.
pub fn inert_chars(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') => {
                out.extend(c.escape_default())
            }
            c => out.push(c),
        }
    }
    out
}

/// A name or path from a sandbox (any bytes) as one printable line: every
/// control character (newline and tab too) and bidi override escaped as
/// [`inert_chars`] does, a byte that is not UTF-8 as `\xNN`, and a
/// backslash doubled, so the shown form maps back to one set of bytes.
pub fn inert_name(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    let mut rest = b;
    while !rest.is_empty() {
        // The valid prefix, then the invalid bytes after it (as utf8_chunks, which is newer than sbx's MSRV).
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, 0),
            Err(e) => {
                let n = e.valid_up_to();
                (std::str::from_utf8(&rest[..n]).unwrap_or(""), e.error_len().unwrap_or(rest.len() - n))
            }
        };
        for c in valid.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                c => out.push_str(&inert_chars(c.encode_utf8(&mut [0; 4]))),
            }
        }
        for x in &rest[valid.len()..valid.len() + bad] {
            out.push_str(&format!("\\x{x:02x}"));
        }
        rest = &rest[valid.len() + bad..];
    }
    out
}

/// The kernel writes space, tab, newline and backslash in mount points as
/// `\ooo` octal escapes.
pub fn unescape_mount_point(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_printable_line() {
        assert_eq!(inert_name(b"a\nE f 644\x1b[2J\xff\\t\t"), r"a\nE f 644\u{1b}[2J\xff\\t\t");
        assert_eq!(inert_name("caf\u{e9} \u{202e}x".as_bytes()), "caf\u{e9} \\u{202e}x");
    }

    #[test]
    fn sandbox_text_is_escaped_and_indented_for_the_terminal() {
        let forged = "\x1b]0;pwned\x07\r\x1b[2Ksbx: ok\nsbx: hint: fine\u{9b}31m\u{202e}x\tand a tab\n";
        let shown = for_terminal(forged);
        assert!(!shown.chars().any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{202e}'), "{shown:?}");
        assert_eq!(shown.lines().nth(1), Some(r"  | sbx: hint: fine\u{9b}31m\u{202e}x	and a tab"));
        assert!(shown.starts_with(r"\u{1b}]0;pwned\u{7}\r\u{1b}[2Ksbx: ok"), "{shown}");
        assert_eq!(for_terminal("plain text"), "plain text");
    }
}
