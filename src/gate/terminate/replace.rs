//! Streaming search and replace over relayed bytes: each needle found is
//! replaced even when it straddles two reads, holding back at most the
//! longest needle less one byte between reads.

use memchr::memmem::Finder;

pub struct Replacer {
    needles: Vec<(Finder<'static>, Vec<u8>)>,
    longest: usize,
    held: Vec<u8>,
}

impl Replacer {
    /// Replace each `from` by its `to`; empty `from`s are skipped.
    pub fn new(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        let needles: Vec<_> =
            pairs.into_iter().filter(|(f, _)| !f.is_empty()).map(|(f, t)| (Finder::new(&f).into_owned(), t)).collect();
        let longest = needles.iter().map(|(f, _)| f.needle().len()).max().unwrap_or(0);
        Replacer { needles, longest, held: Vec::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// Whether `bytes` hold any needle (a whole buffer, no carry-over).
    pub fn found_in(&self, bytes: &[u8]) -> bool {
        self.needles.iter().any(|(f, _)| f.find(bytes).is_some())
    }

    /// Append `data` replaced to `out`, keeping back what may be the start
    /// of a needle; `last` flushes everything.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<u8>, last: bool) {
        if self.needles.is_empty() {
            out.extend_from_slice(data);
            return;
        }
        let owned;
        let buf: &[u8] = if self.held.is_empty() {
            data
        } else {
            self.held.extend_from_slice(data);
            owned = std::mem::take(&mut self.held);
            &owned
        };
        // A match must start before `limit`: then every needle that starts
        // there has arrived whole, and the longest one wins as in one pass.
        let limit = if last { buf.len() } else { buf.len().saturating_sub(self.longest - 1) };
        let mut i = 0;
        loop {
            // The earliest match; at one position, the longest needle.
            let hit = self
                .needles
                .iter()
                .enumerate()
                .filter_map(|(k, (f, _))| f.find(&buf[i..]).map(|p| (i + p, usize::MAX - f.needle().len(), k)))
                .min();
            let Some((p, _, k)) = hit.filter(|h| h.0 < limit) else { break };
            out.extend_from_slice(&buf[i..p]);
            out.extend_from_slice(&self.needles[k].1);
            i = p + self.needles[k].0.needle().len();
        }
        let cut = i.max(limit);
        out.extend_from_slice(&buf[i..cut]);
        self.held = buf[cut..].to_vec();
    }
}

/// Whether a stream holds a needle, across reads (for request bodies: a
/// placeholder there is refused, not replaced).
pub struct Scanner {
    inner: Replacer,
    tail: Vec<u8>,
}

impl Scanner {
    pub fn new(needles: Vec<Vec<u8>>) -> Self {
        Scanner { inner: Replacer::new(needles.into_iter().map(|n| (n, Vec::new())).collect()), tail: Vec::new() }
    }

    /// True once a needle has been seen in what was fed so far.
    pub fn feed(&mut self, data: &[u8]) -> bool {
        if self.inner.is_empty() {
            return false;
        }
        let keep = self.inner.longest - 1;
        let mut seam = std::mem::take(&mut self.tail);
        seam.extend_from_slice(&data[..data.len().min(keep)]);
        // Only the seam needs the old tail: the tail plus the head of `data`.
        let found = self.inner.found_in(&seam) || self.inner.found_in(data);
        if data.len() >= keep {
            self.tail = data[data.len() - keep..].to_vec();
        } else {
            seam.truncate(seam.len() - data.len().min(keep));
            seam.extend_from_slice(data);
            let from = seam.len().saturating_sub(keep);
            self.tail = seam.split_off(from);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(pairs: &[(&str, &str)], chunks: &[&[u8]]) -> Vec<u8> {
        let mut r = Replacer::new(pairs.iter().map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec())).collect());
        let mut out = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            r.feed(c, &mut out, i + 1 == chunks.len());
        }
        out
    }

    #[test]
    fn needles_straddling_reads_are_replaced() {
        assert_eq!(run(&[("secret", "PH")], &[b"a sec", b"ret b secr", b"et", b""]), b"a PH b PH");
        assert_eq!(run(&[("ab", "X"), ("abc", "Y")], &[b"abcab"]), b"YX");
        assert_eq!(run(&[], &[b"as is"]), b"as is");
    }

    #[test]
    fn the_scanner_sees_a_needle_across_reads() {
        let mut s = Scanner::new(vec![b"needle".to_vec()]);
        assert!(!s.feed(b"xxnee"));
        assert!(s.feed(b"dlexx"));
        let mut s = Scanner::new(vec![b"needle".to_vec()]);
        assert!(!s.feed(b"n") && !s.feed(b"e") && !s.feed(b"edl") && s.feed(b"e"));
    }

    proptest! {
        #[test]
        fn any_split_replaces_like_one_pass(text in "[abs]{0,60}", cut in 0usize..60, cut2 in 0usize..60) {
            let whole = run(&[("sab", "Q"), ("ba", "")], &[text.as_bytes()]);
            let b = text.as_bytes();
            let (c1, c2) = (cut.min(b.len()), cut2.min(b.len()));
            let (c1, c2) = (c1.min(c2), c1.max(c2));
            let split = run(&[("sab", "Q"), ("ba", "")], &[&b[..c1], &b[c1..c2], &b[c2..]]);
            prop_assert_eq!(whole, split);
        }
    }
}
