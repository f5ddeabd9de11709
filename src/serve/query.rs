//! The list query (`GET /v2/sandboxes?state=..&metadata=..&limit=..&nextToken=..`),
//! decoded strictly: a query is untrusted input like a body.

use std::collections::BTreeMap;

use serde_json::Value;

const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;

/// `%XX` and `+` decoded; None on a malformed escape or bytes that are not UTF-8.
pub fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// `k=v&k2=v2`, each side decoded.
pub fn pairs(q: &str) -> Option<Vec<(String, String)>> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((decode(k)?, decode(v)?))
        })
        .collect()
}

#[derive(Debug, Default, PartialEq)]
pub struct ListQuery {
    /// None: running and paused.
    pub states: Option<Vec<String>>,
    pub metadata: Vec<(String, String)>,
    pub limit: usize,
    /// Where the previous page ended (the `x-next-token` it answered).
    pub after: Option<String>,
}

impl ListQuery {
    pub fn parse(q: &str) -> Result<Self, String> {
        let mut out = ListQuery { limit: DEFAULT_LIMIT, ..Default::default() };
        for (k, v) in pairs(q).ok_or("the query string is malformed")? {
            match k.as_str() {
                "state" => {
                    let states: Vec<String> = v.split(',').map(str::to_string).collect();
                    if let Some(s) = states.iter().find(|s| !["running", "paused"].contains(&s.as_str())) {
                        return Err(format!("state {s:?} is neither running nor paused"));
                    }
                    out.states = Some(states);
                }
                // The SDK sends the filter as a urlencoded form of quoted keys and values.
                "metadata" => {
                    for (mk, mv) in pairs(&v).ok_or("metadata is malformed")? {
                        out.metadata.push((decode(&mk).unwrap_or(mk), decode(&mv).unwrap_or(mv)));
                    }
                }
                "limit" => {
                    out.limit = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or(format!("limit must be a number from 1 to {MAX_LIMIT}"))?
                }
                "nextToken" => {
                    out.after = Some(unhex(&v).ok_or("nextToken is not one this server gave")?);
                }
                // Filters sbx does not apply yet would silently widen the answer: refused.
                "startedAfter" | "template" | "order" => return Err(format!("the {k} filter is not supported yet")),
                _ => {}
            }
        }
        Ok(out)
    }

    pub fn wants(&self, state: &str, metadata: &BTreeMap<String, String>) -> bool {
        self.states.as_ref().is_none_or(|s| s.iter().any(|x| x == state))
            && self.metadata.iter().all(|(k, v)| metadata.get(k) == Some(v))
    }

    /// `rows` sorted by key: the page after `after`, and the next token if more follow.
    pub fn page(&self, rows: Vec<(String, Value)>) -> (Vec<Value>, Option<String>) {
        let rest: Vec<(String, Value)> =
            rows.into_iter().filter(|(k, _)| self.after.as_ref().is_none_or(|a| k > a)).collect();
        let more = rest.len() > self.limit;
        let page: Vec<(String, Value)> = rest.into_iter().take(self.limit).collect();
        let next = if more { page.last().map(|(k, _)| hex(k)) } else { None };
        (page.into_iter().map(|(_, v)| v).collect(), next)
    }
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if s.len() % 2 != 0 || s.len() > 512 {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes?).ok()
}
