//! Text a sandbox wrote, made safe to print as part of sbx's own messages.

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

#[cfg(test)]
mod tests {
    use super::*;

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
