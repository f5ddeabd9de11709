//! BENCHMARKS.md by its `## ` sections: a full run rewrites the ones it
//! makes and keeps the rest (also tested from tests/parsers.rs).

/// A markdown file cut at its `## ` headings: (heading, text) pairs, the
/// text before the first heading under "".
pub fn sections(md: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![(String::new(), String::new())];
    for line in md.split_inclusive('\n') {
        if let Some(title) = line.strip_prefix("## ") {
            out.push((title.trim_end().to_string(), String::new()));
        }
        out.last_mut().unwrap().1.push_str(line);
    }
    out
}

/// `new`'s sections in place of `old`'s of the same heading; `old`'s that
/// `new` has not kept where they were; `new`'s that `old` lacked after the
/// section that precedes them in `new`.
pub fn merge_sections(old: &str, new: &str) -> String {
    let mut merged = sections(old);
    let mut after = 0;
    for (title, text) in sections(new) {
        match merged.iter().position(|(t, _)| *t == title) {
            Some(i) => {
                merged[i].1 = text;
                after = i;
            }
            None => {
                after = (after + 1).min(merged.len());
                merged.insert(after, (title, text));
            }
        }
    }
    let mut out = String::new();
    for (_, text) in merged {
        out.push_str(text.trim_end_matches('\n'));
        out.push_str("\n\n");
    }
    format!("{}\n", out.trim_end())
}
