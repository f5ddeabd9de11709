//! The server name in a TLS ClientHello, read from the first bytes a
//! sandbox sends through a CONNECT tunnel, so the gate can hold it to the
//! name the policy allowed (a tunnel to an allowed address must not carry a
//! handshake for another name on the same host or CDN). Bounded: a hello
//! over [`MAX_HELLO`] bytes is refused, not buffered.

/// Largest ClientHello the gate reads (post-quantum key shares make them
/// 2 KiB today; 16 KiB leaves room without letting a client park memory).
pub const MAX_HELLO: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// The bytes are not a TLS handshake: not the gate's business.
    NotTls,
    /// A ClientHello so far; read more.
    Incomplete,
    /// A complete ClientHello, with its server name if it has one.
    Sni(Option<String>),
    /// Looks like TLS but is not a hello the gate can read.
    Malformed(&'static str),
}

/// Is `buf` (the client's first bytes) the start of a TLS handshake?
pub fn parse(buf: &[u8]) -> Hello {
    if buf.first() != Some(&0x16) {
        return Hello::NotTls;
    }
    // Gather the handshake bytes of consecutive handshake records.
    let mut hs = Vec::new();
    let mut at = 0;
    loop {
        let Some(rec) = buf.get(at..at + 5) else { return Hello::Incomplete };
        if rec[0] != 0x16 {
            return Hello::Malformed("the ClientHello is interleaved with another record type");
        }
        if rec[1] != 3 {
            return Hello::Malformed("not a TLS record version");
        }
        let len = u16::from_be_bytes([rec[3], rec[4]]) as usize;
        if len == 0 || len > 16 * 1024 {
            return Hello::Malformed("bad TLS record length");
        }
        let Some(body) = buf.get(at + 5..at + 5 + len) else { return Hello::Incomplete };
        hs.extend_from_slice(body);
        at += 5 + len;
        if hs.len() >= 4 {
            if hs[0] != 1 {
                return Hello::Malformed("the first handshake message is not a ClientHello");
            }
            let need = u32::from_be_bytes([0, hs[1], hs[2], hs[3]]) as usize;
            if need > MAX_HELLO {
                return Hello::Malformed("ClientHello too large");
            }
            if hs.len() >= 4 + need {
                return match server_name(&hs[4..4 + need]) {
                    Ok(name) => Hello::Sni(name),
                    Err(e) => Hello::Malformed(e),
                };
            }
        }
        if at >= 5 + MAX_HELLO + 5 * 8 {
            return Hello::Malformed("ClientHello too large");
        }
    }
}

/// Extension types that encrypt the server name: encrypted_client_hello
/// (RFC 9460's ECH) and the draft ESNI that preceded it.
const ECH: usize = 0xfe0d;
const ESNI: usize = 0xffce;

/// A cursor over a byte slice that fails instead of panicking.
struct Cur<'a>(&'a [u8]);

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("truncated ClientHello");
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<usize, &'static str> {
        Ok(self.take(1)?[0] as usize)
    }
    fn u16(&mut self) -> Result<usize, &'static str> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]) as usize)
    }
}

fn server_name(hello: &[u8]) -> Result<Option<String>, &'static str> {
    let mut c = Cur(hello);
    c.take(2 + 32)?; // version, random
    let n = c.u8()?;
    c.take(n)?; // session id
    let n = c.u16()?;
    c.take(n)?; // cipher suites
    let n = c.u8()?;
    c.take(n)?; // compression methods
    if c.0.is_empty() {
        return Ok(None);
    }
    let n = c.u16()?;
    let mut ext = Cur(c.take(n)?);
    let mut found = None;
    while !ext.0.is_empty() {
        let kind = ext.u16()?;
        let n = ext.u16()?;
        let data = ext.take(n)?;
        if kind == ECH || kind == ESNI {
            // The name the server acts on is the encrypted inner one: an
            // allowed outer name would front for any name on that server.
            return Err("it carries Encrypted Client Hello, which hides the server name from the gate");
        }
        if kind != 0 {
            continue;
        }
        if found.is_some() {
            return Err("two server_name extensions");
        }
        let mut list = Cur(data);
        let n = list.u16()?;
        let mut names = Cur(list.take(n)?);
        while !names.0.is_empty() {
            let kind = names.u8()?;
            let n = names.u16()?;
            let name = names.take(n)?;
            if kind == 0 {
                if found.is_some() {
                    return Err("two host names in server_name");
                }
                let name = std::str::from_utf8(name).map_err(|_| "server name is not ASCII")?;
                if !name.is_ascii() {
                    return Err("server name is not ASCII");
                }
                found = Some(name.to_string());
            }
        }
        if found.is_none() {
            return Err("server_name without a host name");
        }
    }
    Ok(found)
}

/// A ClientHello for tests (TLS 1.2 record, one cipher suite, optional SNI),
/// split into records of at most `record` handshake bytes.
#[cfg(test)]
pub fn client_hello(sni: Option<&str>, record: usize) -> Vec<u8> {
    client_hello_with(sni, &[], record)
}

/// [`client_hello`] with more extensions (type, data) after the server name.
#[cfg(test)]
pub fn client_hello_with(sni: Option<&str>, more: &[(u16, &[u8])], record: usize) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend([7u8; 32]);
    body.extend([0, 0, 2, 0x13, 0x01, 1, 0]);
    let mut exts = Vec::new();
    if let Some(name) = sni {
        let n = name.len() as u16;
        exts.extend([0, 0]);
        exts.extend((n + 5).to_be_bytes());
        exts.extend((n + 3).to_be_bytes());
        exts.push(0);
        exts.extend(n.to_be_bytes());
        exts.extend(name.as_bytes());
    }
    for (kind, data) in more {
        exts.extend(kind.to_be_bytes());
        exts.extend((data.len() as u16).to_be_bytes());
        exts.extend(*data);
    }
    body.extend((exts.len() as u16).to_be_bytes());
    body.extend(exts);
    let mut hs = vec![1];
    hs.extend(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend(body);
    let mut out = Vec::new();
    for chunk in hs.chunks(record) {
        out.extend([0x16, 3, 1]);
        out.extend((chunk.len() as u16).to_be_bytes());
        out.extend(chunk);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_server_name_across_records_and_waits_for_the_rest() {
        let hello = client_hello(Some("Files.Example"), 20);
        assert_eq!(parse(&hello), Hello::Sni(Some("Files.Example".into())));
        assert_eq!(parse(&hello[..hello.len() - 1]), Hello::Incomplete);
        assert_eq!(parse(&hello[..3]), Hello::Incomplete);
        assert_eq!(parse(&client_hello(None, 1000)), Hello::Sni(None));
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let mut hello = client_hello(Some("a.example"), 1000);
        hello[5] = 2; // ServerHello
        assert_eq!(parse(&hello), Hello::Malformed("the first handshake message is not a ClientHello"));
        let mut big = client_hello(None, 1000);
        big[6..9].copy_from_slice(&[0, 0x50, 0]);
        assert_eq!(parse(&big), Hello::Malformed("ClientHello too large"));
        let mut cut = client_hello(Some("a.example"), 1000);
        let n = cut.len();
        cut[3..5].copy_from_slice(&((n - 5 - 3) as u16).to_be_bytes());
        cut[6..9].copy_from_slice(&((n - 5 - 4 - 3) as u32).to_be_bytes()[1..]);
        cut.truncate(n - 3);
        assert!(matches!(parse(&cut), Hello::Malformed(_)), "{:?}", parse(&cut));
    }
}
