//! What a sandbox sends back, bounded and made fit for a model: a
//! command's streams keep their first bytes and count the rest; text is
//! valid UTF-8 (U+FFFD for other bytes) with control characters escaped,
//! or base64 for the exact bytes. JSON itself carries any string.

use base64::Engine;
use serde_json::{json, Value};

/// One stream of a command's output: its first `max` bytes and how many came.
#[derive(Debug, Default)]
pub struct Capped {
    pub kept: Vec<u8>,
    pub total: u64,
    max: usize,
}

impl Capped {
    pub fn new(max: usize) -> Self {
        Capped { kept: Vec::new(), total: 0, max }
    }

    pub fn push(&mut self, b: &[u8]) {
        self.total += b.len() as u64;
        let room = self.max.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&b[..b.len().min(room)]);
    }

    pub fn truncated(&self) -> bool {
        self.total > self.kept.len() as u64
    }
}

/// How bytes come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Text,
    Base64,
}

impl Encoding {
    pub fn parse(v: &Value) -> Result<Self, String> {
        match v {
            Value::Null => Ok(Encoding::Text),
            v if v == "text" => Ok(Encoding::Text),
            v if v == "base64" => Ok(Encoding::Base64),
            v => Err(format!("encoding {v} is neither \"text\" nor \"base64\"")),
        }
    }
}

/// Output as text a model can be shown: lossy UTF-8, every control
/// character but newline and tab escaped (an ESC never reaches a terminal
/// that shows it); whether bytes were not UTF-8.
pub fn shown(b: &[u8]) -> (String, bool) {
    let lossy = String::from_utf8_lossy(b);
    let replaced = matches!(lossy, std::borrow::Cow::Owned(_));
    (crate::model::text::inert_chars(&lossy), replaced)
}

/// `b` without a UTF-8 sequence its cut left incomplete at its end.
pub fn whole_chars(b: &[u8]) -> &[u8] {
    for back in 1..=b.len().min(3) {
        let i = b.len() - back;
        let lead = b[i];
        if lead & 0xc0 == 0x80 {
            continue;
        }
        let need = match lead {
            0xf0.. => 4,
            0xe0.. => 3,
            0xc0.. => 2,
            _ => 1,
        };
        return if need > back { &b[..i] } else { b };
    }
    b
}

/// One stream as a result's fields: `NAME` (text or base64), and, when it
/// was cut, `NAME_truncated` with `NAME_bytes`, the whole count. Text is
/// cut to the cap after escaping too, so a stream of control characters
/// (each shown as several) stays as bounded as any other.
pub fn stream_fields(name: &str, c: &Capped, enc: Encoding, into: &mut serde_json::Map<String, Value>) -> Vec<String> {
    let mut notes = Vec::new();
    let mut cut = c.truncated();
    let value = match enc {
        Encoding::Base64 => base64::engine::general_purpose::STANDARD.encode(&c.kept),
        Encoding::Text => {
            let kept = if cut { whole_chars(&c.kept) } else { &c.kept[..] };
            let (mut text, replaced) = shown(kept);
            if replaced {
                notes.push(format!("{name} is not all UTF-8: shown with U+FFFD; encoding base64 gives the bytes"));
            }
            if text.len() > c.max {
                let mut at = c.max;
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                text.truncate(at);
                cut = true;
            }
            text
        }
    };
    into.insert(name.into(), json!(value));
    if cut {
        into.insert(format!("{name}_truncated"), json!(true));
        into.insert(format!("{name}_bytes"), json!(c.total));
        notes.push(format!(
            "{name} was {} bytes: cut to max_output_bytes ({}; escaped control characters count as shown); \
             raise it, or write the output to a file and read_file it",
            c.total, c.max
        ));
    }
    notes
}
