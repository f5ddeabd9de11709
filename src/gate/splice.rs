//! Bulk relaying without copying through the gate's memory: `splice(2)`
//! moves bytes from one socket into a pipe and from the pipe into the other
//! socket inside the kernel. A plain copy loop reached ~61-77% of a direct
//! connection's throughput on 2 cores (the bench's 200 MiB case); the pipe
//! costs two descriptors, so only a connection that has shown itself a bulk
//! transfer switches to it (see `conn::pump`).

use std::io;
use std::os::fd::AsRawFd;

use nix::fcntl::{splice, FcntlArg, OFlag, SpliceFFlags};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// The pipe's capacity, asked for (the kernel may give less).
const PIPE_SIZE: i32 = 1 << 20;

/// Why a splice relay stopped early.
pub(super) enum Stop {
    /// No pipe could be made: the caller goes on copying.
    NoPipe(OwnedReadHalf, OwnedWriteHalf),
    /// A socket failed.
    Io,
}

/// Relay up to `left` bytes from `from` to `to`, counting them; at EOF shut
/// `to`'s write side (Ok(None)), at the limit hand `to` back (Ok(Some)).
pub(super) async fn relay(
    from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    count: &mut u64,
    mut left: u64,
) -> Result<Option<OwnedWriteHalf>, Stop> {
    let Ok((pr, pw)) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC) else {
        return Err(Stop::NoPipe(from, to));
    };
    let _ = nix::fcntl::fcntl(pw.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
    let flags = SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE;
    let src: &TcpStream = from.as_ref();
    while left > 0 {
        let want = left.min(PIPE_SIZE as u64) as usize;
        let n = loop {
            src.readable().await.map_err(|_| Stop::Io)?;
            match src.try_io(Interest::READABLE, || splice(src, None, &pw, None, want, flags).map_err(io::Error::from))
            {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return Err(Stop::Io),
            }
        };
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(None);
        }
        let dst: &TcpStream = to.as_ref();
        let mut in_pipe = n;
        while in_pipe > 0 {
            dst.writable().await.map_err(|_| Stop::Io)?;
            match dst
                .try_io(Interest::WRITABLE, || splice(&pr, None, dst, None, in_pipe, flags).map_err(io::Error::from))
            {
                Ok(m) => in_pipe -= m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return Err(Stop::Io),
            }
        }
        *count += n as u64;
        left -= n as u64;
    }
    Ok(Some(to))
}
