//! A minimal DNS client for `--egress-dns`: A and AAAA queries over UDP to
//! one resolver, bounded in time and size. The resolver is not trusted
//! either: a reply must match the query (id, question, type) and parse
//! within bounds, and whatever addresses it gives are still judged one by one
//! by `Policy::check_addr` (DNS rebinding).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::net::UdpSocket;

const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
/// Answers the gate reads from one reply; the rest is ignored.
const MAX_ANSWERS: usize = 32;
const TRIES: usize = 2;

/// The addresses of `name` (A first, then AAAA), asking `server`.
/// NXDOMAIN or no data: an empty list.
pub async fn resolve(server: SocketAddr, name: &str, wait: Duration) -> std::io::Result<Vec<IpAddr>> {
    let (a, aaaa) = tokio::join!(query(server, name, TYPE_A, wait), query(server, name, TYPE_AAAA, wait));
    match (a, aaaa) {
        (Err(e), Err(_)) => Err(e),
        (a, aaaa) => Ok(a.unwrap_or_default().into_iter().chain(aaaa.unwrap_or_default()).collect()),
    }
}

async fn query(server: SocketAddr, name: &str, qtype: u16, wait: Duration) -> std::io::Result<Vec<IpAddr>> {
    let bind: SocketAddr =
        if server.is_ipv4() { (Ipv4Addr::UNSPECIFIED, 0).into() } else { (Ipv6Addr::UNSPECIFIED, 0).into() };
    let sock = UdpSocket::bind(bind).await?;
    // Connected: the kernel drops datagrams from any other address.
    sock.connect(server).await?;
    let mut last = std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer from {server}"));
    for _ in 0..TRIES {
        let id: u16 = rand::random();
        sock.send(&encode(id, name, qtype)?).await?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut buf = [0u8; 1500];
        loop {
            let n = match tokio::time::timeout_at(deadline, sock.recv(&mut buf)).await {
                Err(_) => break,
                Ok(r) => r?,
            };
            match decode(&buf[..n], id, name, qtype) {
                Ok(Some(addrs)) => return Ok(addrs),
                Ok(None) => continue, // another query's reply: keep waiting
                Err(e) => {
                    last = std::io::Error::new(std::io::ErrorKind::InvalidData, format!("resolver {server}: {e}"));
                    break;
                }
            }
        }
    }
    Err(last)
}

/// A recursive query for `name` (already validated by `head::normalize_host`).
pub fn encode(id: u16, name: &str, qtype: u16) -> std::io::Result<Vec<u8>> {
    let mut q = Vec::with_capacity(name.len() + 18);
    q.extend(id.to_be_bytes());
    q.extend([0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD; one question
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad DNS name"));
        }
        q.push(label.len() as u8);
        q.extend(label.as_bytes());
    }
    q.push(0);
    q.extend(qtype.to_be_bytes());
    q.extend(1u16.to_be_bytes()); // IN
    Ok(q)
}

struct Cur<'a> {
    msg: &'a [u8],
    at: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let s = self.msg.get(self.at..self.at + n).ok_or("truncated reply")?;
        self.at += n;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, &'static str> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    /// Skip a (possibly compressed) name; returns its labels when it is not
    /// compressed (the question must not be).
    fn name(&mut self) -> Result<Option<String>, &'static str> {
        let mut out = String::new();
        for _ in 0..128 {
            let len = self.take(1)?[0];
            match len {
                0 => return Ok(Some(out)),
                l if l & 0xc0 == 0xc0 => {
                    self.take(1)?;
                    return Ok(None);
                }
                l if l & 0xc0 != 0 => return Err("bad label"),
                l => {
                    let label = self.take(l as usize)?;
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(&String::from_utf8_lossy(label));
                }
            }
        }
        Err("name too long")
    }
}

/// The addresses in a reply to query `id` for (`name`, `qtype`); Ok(None):
/// not a reply to this query.
pub fn decode(msg: &[u8], id: u16, name: &str, qtype: u16) -> Result<Option<Vec<IpAddr>>, &'static str> {
    let mut c = Cur { msg, at: 0 };
    if c.u16()? != id {
        return Ok(None);
    }
    let flags = c.u16()?;
    if flags & 0x8000 == 0 || flags & 0x7800 != 0 {
        return Err("not a query reply");
    }
    if flags & 0x0200 != 0 {
        return Err("truncated reply (TC)");
    }
    let (qd, an) = (c.u16()?, c.u16()? as usize);
    c.take(4)?; // NS, AR counts: not read
    if qd != 1 {
        return Err("reply without our question");
    }
    let qname = c.name()?.ok_or("compressed question")?;
    if !qname.eq_ignore_ascii_case(name) || c.u16()? != qtype || c.u16()? != 1 {
        return Err("reply to another question");
    }
    match flags & 0x000f {
        0 => {}
        3 => return Ok(Some(Vec::new())), // NXDOMAIN
        _ => return Err("resolver error"),
    }
    let mut addrs = Vec::new();
    for _ in 0..an.min(MAX_ANSWERS) {
        c.name()?;
        let (kind, class) = (c.u16()?, c.u16()?);
        c.take(4)?; // TTL
        let len = c.u16()? as usize;
        let data = c.take(len)?;
        match (kind, class, len) {
            (TYPE_A, 1, 4) if qtype == TYPE_A => addrs.push(IpAddr::from(<[u8; 4]>::try_from(data).unwrap())),
            (TYPE_AAAA, 1, 16) if qtype == TYPE_AAAA => addrs.push(IpAddr::from(<[u8; 16]>::try_from(data).unwrap())),
            (TYPE_A | TYPE_AAAA, _, _) if kind == qtype => return Err("malformed address record"),
            _ => {} // CNAME and others: the resolver has followed them
        }
    }
    Ok(Some(addrs))
}

/// A resolver stand-in for tests: answers A queries for `names` with
/// 127.0.0.1 (others NXDOMAIN), AAAA with no data, and counts the queries.
#[cfg(test)]
pub async fn stand_in(names: &'static [&'static str]) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            seen.fetch_add(1, Ordering::SeqCst);
            let q = &buf[..n];
            let mut c = Cur { msg: q, at: 12 };
            let name = c.name().ok().flatten().unwrap_or_default();
            let qtype = c.u16().unwrap_or(0);
            let end = c.at + 2; // past the class
            let known = names.contains(&name.as_str());
            let mut r = q[..2].to_vec();
            r.extend([0x81, if known { 0x80 } else { 0x83 }, 0, 1]);
            let answers = u16::from(known && qtype == TYPE_A);
            r.extend(answers.to_be_bytes());
            r.extend([0, 0, 0, 0]);
            r.extend(&q[12..end]);
            if answers == 1 {
                r.extend([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
            }
            let _ = sock.send_to(&r, from).await;
        }
    });
    (addr, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn resolves_through_the_stand_in_and_reads_nxdomain_as_no_address() {
        let (server, count) = stand_in(&["files.example"]).await;
        let wait = Duration::from_secs(2);
        assert_eq!(resolve(server, "files.example", wait).await.unwrap(), [IpAddr::from([127, 0, 0, 1])]);
        assert!(resolve(server, "nope.example", wait).await.unwrap().is_empty());
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 4);
    }

    #[test]
    fn refuses_replies_that_do_not_match_the_question() {
        let q = encode(7, "a.example", TYPE_A).unwrap();
        let mut r = q.clone();
        r[2] = 0x81;
        r[3] = 0x80;
        assert_eq!(decode(&r, 8, "a.example", TYPE_A), Ok(None), "another id");
        assert_eq!(decode(&r, 7, "b.example", TYPE_A), Err("reply to another question"));
        assert_eq!(decode(&q, 7, "a.example", TYPE_A), Err("not a query reply"));
        r[7] = 1; // one answer, missing
        assert_eq!(decode(&r, 7, "a.example", TYPE_A), Err("truncated reply"));
        r.extend([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 3, 1, 2, 3]);
        assert_eq!(decode(&r, 7, "a.example", TYPE_A), Err("malformed address record"));
    }
}
