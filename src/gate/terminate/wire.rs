//! One side of a terminated connection as HTTP/1.1 messages: a buffered
//! reader for heads, chunk-size lines and body pieces, and the writer of
//! re-framed bodies. Strict where the sandbox writes (CRLF only, bounded
//! lines, hex sizes only); the same rules hold for upstreams.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest head (request or response line and headers).
pub const MAX_HEAD: usize = 64 * 1024;
/// Read buffer: it starts small (idle kept-alive connections stay cheap in
/// the gate's memory limit) and doubles up to READ_MAX while reads fill it.
const READ: usize = 16 * 1024;
const READ_MAX: usize = 256 * 1024;
/// Largest chunk-size or trailer line.
const MAX_LINE: usize = 4096;

/// How a body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body, or a body read to its end.
    Done,
    /// This many bytes left.
    Length(u64),
    /// Chunked: bytes left in the current chunk; whether a chunk was read
    /// (its CRLF comes before the next size line).
    Chunked { left: u64, started: bool },
    /// Until the connection ends (responses only).
    Close,
}

pub struct Wire<S> {
    pub io: S,
    /// Zeroed once; `pos..end` is what has been read and not taken.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    pub fn new(io: S) -> Self {
        Wire { io, buf: vec![0; READ], pos: 0, end: 0 }
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Read more; 0 at the end of the stream.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.pos == self.end {
            (self.pos, self.end) = (0, 0);
        } else if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            (self.pos, self.end) = (0, self.end - self.pos);
        }
        // Full: a head longer than the buffer (bounded by MAX_HEAD) or
        // bulk data; either way a larger buffer.
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let n = self.io.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        if self.end == self.buf.len() && self.buf.len() < READ_MAX {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        Ok(n)
    }

    /// The next head, up to its empty line; None at a clean end of the
    /// stream before its first byte.
    pub async fn head(&mut self) -> Result<Option<Vec<u8>>, String> {
        let mut searched = 0;
        loop {
            let d = self.data();
            if let Some(p) = memchr::memmem::find(&d[searched..], b"\r\n\r\n") {
                let end = searched + p + 4;
                let head = d[..end].to_vec();
                self.pos += end;
                return Ok(Some(head));
            }
            searched = d.len().saturating_sub(3);
            if d.len() > MAX_HEAD {
                return Err(format!("a head over {} KiB", MAX_HEAD / 1024));
            }
            match self.fill().await {
                Ok(0) if self.data().is_empty() => return Ok(None),
                Ok(0) => return Err("the connection ended inside a head".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("reading a head: {e}")),
            }
        }
    }

    /// One CRLF-ended line (without it).
    async fn line(&mut self) -> Result<Vec<u8>, String> {
        let mut searched = 0;
        loop {
            let d = self.data();
            if let Some(p) = memchr::memchr(b'\n', &d[searched..]) {
                let end = searched + p;
                if end == 0 || d[end - 1] != b'\r' {
                    return Err("a bare LF in chunked framing".into());
                }
                let line = d[..end - 1].to_vec();
                self.pos += end + 1;
                return Ok(line);
            }
            searched = d.len();
            if d.len() > MAX_LINE {
                return Err("a chunk-size or trailer line over 4 KiB".into());
            }
            match self.fill().await {
                Ok(0) => return Err("the connection ended inside chunked framing".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("reading chunked framing: {e}")),
            }
        }
    }

    /// The next piece of a body (at most `max` bytes), advancing `body`;
    /// None when it has ended. Err: broken framing or a cut connection.
    pub async fn piece(&mut self, body: &mut Body, max: usize) -> Result<Option<Vec<u8>>, String> {
        loop {
            match *body {
                Body::Done => return Ok(None),
                Body::Length(0) => {
                    *body = Body::Done;
                    return Ok(None);
                }
                Body::Length(left) => {
                    let n = self.take(left.min(max as u64) as usize, "the connection ended inside a body").await?;
                    *body = Body::Length(left - n.len() as u64);
                    return Ok(Some(n));
                }
                Body::Close => {
                    if self.data().is_empty() && self.fill().await.map_err(|e| format!("reading a body: {e}"))? == 0 {
                        *body = Body::Done;
                        return Ok(None);
                    }
                    let n = self.data().len().min(max);
                    let piece = self.data()[..n].to_vec();
                    self.pos += n;
                    return Ok(Some(piece));
                }
                Body::Chunked { left: 0, started } => {
                    if started && !self.line().await?.is_empty() {
                        return Err("a chunk longer than its size".into());
                    }
                    let line = self.line().await?;
                    let size = chunk_size(&line)?;
                    if size == 0 {
                        // Trailers are dropped: nothing of them goes on.
                        let mut total = 0;
                        loop {
                            let t = self.line().await?;
                            total += t.len();
                            if t.is_empty() {
                                break;
                            }
                            if total > MAX_HEAD {
                                return Err("trailers over 64 KiB".into());
                            }
                        }
                        *body = Body::Done;
                        return Ok(None);
                    }
                    *body = Body::Chunked { left: size, started: true };
                }
                Body::Chunked { left, .. } => {
                    let n = self.take(left.min(max as u64) as usize, "the connection ended inside a chunk").await?;
                    *body = Body::Chunked { left: left - n.len() as u64, started: true };
                    return Ok(Some(n));
                }
            }
        }
    }

    /// Between 1 and `want` bytes (`want` > 0).
    async fn take(&mut self, want: usize, cut: &str) -> Result<Vec<u8>, String> {
        if self.data().is_empty() && self.fill().await.map_err(|e| format!("reading a body: {e}"))? == 0 {
            return Err(cut.into());
        }
        let n = self.data().len().min(want);
        let piece = self.data()[..n].to_vec();
        self.pos += n;
        Ok(piece)
    }

    /// Whether the peer has closed (or sent something unasked) by now,
    /// without waiting: a kept-alive upstream may have timed out.
    pub async fn stale(&mut self) -> bool {
        if !self.data().is_empty() {
            return true;
        }
        match tokio::time::timeout(std::time::Duration::ZERO, self.fill()).await {
            Ok(Ok(_)) | Ok(Err(_)) => true,
            Err(_) => false,
        }
    }

    /// Write and flush.
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.write_all(bytes).await?;
        self.io.flush().await
    }
}

/// A chunk-size line: hex digits, then optionally `;extensions` (dropped).
fn chunk_size(line: &[u8]) -> Result<u64, String> {
    let hex = match memchr::memchr(b';', line) {
        Some(i) => &line[..i],
        None => line,
    };
    let bad = || "a malformed chunk size".to_string();
    if hex.is_empty() || hex.len() > 15 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return Err(bad());
    }
    u64::from_str_radix(std::str::from_utf8(hex).map_err(|_| bad())?, 16).map_err(|_| bad())
}

/// `data` as one chunk (nothing for empty data: that would end the body).
pub fn chunk(data: &[u8], out: &mut Vec<u8>) {
    if !data.is_empty() {
        out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    }
}

pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";
