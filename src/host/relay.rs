//! Byte relay between stdin/stdout and a connected socket, with half-close:
//! EOF on stdin shuts down the socket's write side, and the relay ends when
//! the sandbox closes its side, so `printf 'q' | sbx connect ID` gets the
//! whole answer.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;

pub fn stdio(stream: UnixStream) -> io::Result<()> {
    relay(stream, io::stdin(), io::stdout())
}

pub fn relay<R, W>(stream: UnixStream, input: R, mut output: W) -> io::Result<()>
where
    R: Read + Send + 'static,
    W: Write,
{
    let mut to_sock = stream.try_clone()?;
    // The writer thread is detached: if the sandbox closes first, sbx exits
    // without waiting for a terminal that may never send EOF.
    std::thread::spawn(move || {
        let mut input = input;
        let _ = copy(&mut input, &mut to_sock);
        let _ = to_sock.shutdown(Shutdown::Write);
    });
    let mut from = stream;
    match copy(&mut from, &mut output) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map(|_| ()),
    }
}

/// [`relay`] over any channel (see `channel`): stdin to the connection,
/// the connection to stdout, then how the channel ended.
pub fn conn_stdio(conn: crate::host::channel::Conn, id: &str) -> crate::error::Result<()> {
    relay_conn(conn, io::stdin(), io::stdout(), id)
}

pub fn relay_conn<R, W>(conn: crate::host::channel::Conn, input: R, mut output: W, id: &str) -> crate::error::Result<()>
where
    R: Read + Send + 'static,
    W: Write,
{
    let crate::host::channel::Conn { mut reader, writer, end, .. } = conn;
    // Detached, as in `relay`: dropping the writer is the half-close.
    std::thread::spawn(move || {
        let (mut input, mut writer) = (input, writer);
        let _ = copy(&mut input, &mut writer);
    });
    match copy(&mut reader, &mut output) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(crate::error::Error::io(format!("relaying to {id}"), e)),
        Ok(_) => {}
    }
    end()
}

/// Every relay in sbx copies with this loop, never `io::copy`: on Linux
/// `io::copy` from a socket into a pipe becomes splice(2), which held the
/// bytes of a request in the pipe until the client half-closed, so
/// port-forward answered nothing to keep-alive HTTP. One
/// read(2), one write(2) of what it got, flushed: each chunk goes on at once.
pub fn copy<R: Read, W: Write>(r: &mut R, w: &mut W) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        w.write_all(&buf[..n])?;
        w.flush()?;
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_close_gets_the_whole_answer() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            b.write_all(&got).unwrap();
            b.write_all(b"!").unwrap();
        });
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut out = Vec::new();
        relay(a, io::Cursor::new(data.clone()), &mut out).unwrap();
        server.join().unwrap();
        assert_eq!(out.len(), data.len() + 1);
        assert_eq!(&out[..data.len()], &data[..]);
    }
}
