//! The helper's `run` stream (`sbx-helper run [--stdin] [--pty COLS ROWS]
//! -- CMD...`): one command's pid, stdout and stderr as they come, and how
//! it ended, multiplexed on the helper's stdout as frames of a tag byte, a
//! big-endian u32 length and that many bytes. With `--stdin` or `--pty`
//! the helper reads frames of the same shape on its own stdin (input, end
//! of input, a terminal size): never raw bytes, so a resize can never be
//! mistaken for input. On a terminal (`--pty`) the command's output comes
//! as STDOUT frames. std only: the helper includes this file with
//! `#[path]`, so both sides read one format.

use std::io::{self, Read, Write};

/// The command's pid inside the sandbox, as decimal text; first.
pub const PID: u8 = b'p';
pub const STDOUT: u8 = b'o';
pub const STDERR: u8 = b'e';
/// How it ended, last: `N` (its exit code) or `signal N`.
pub const EXIT: u8 = b'x';
/// The most one frame carries; the helper reads its pipes in such chunks.
pub const MAX_FRAME: usize = 64 * 1024;

/// Input, host to helper: bytes for the command's stdin (or terminal).
pub const INPUT: u8 = b'i';
/// Input: end of the command's stdin (EOF); ignored on a terminal.
pub const CLOSE: u8 = b'c';
/// Input: the terminal's new size, `COLS ROWS` in decimal.
pub const RESIZE: u8 = b'w';

pub fn write_frame(w: &mut dyn Write, tag: u8, payload: &[u8]) -> io::Result<()> {
    let mut head = [tag, 0, 0, 0, 0];
    head[1..].copy_from_slice(&(payload.len() as u32).to_be_bytes());
    w.write_all(&head)?;
    w.write_all(payload)?;
    w.flush()
}

/// The next frame, None at a clean end; a frame that is not one the
/// helper writes (an unknown tag, too long, cut short) is an error.
pub fn read_frame(r: &mut dyn Read) -> io::Result<Option<(u8, Vec<u8>)>> {
    read_tagged(r, &[PID, STDOUT, STDERR, EXIT])
}

/// The next input frame (the helper's side), as [`read_frame`].
pub fn read_input(r: &mut dyn Read) -> io::Result<Option<(u8, Vec<u8>)>> {
    read_tagged(r, &[INPUT, CLOSE, RESIZE])
}

fn read_tagged(r: &mut dyn Read, tags: &[u8]) -> io::Result<Option<(u8, Vec<u8>)>> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, format!("the helper's run stream: {m}"));
    let mut head = [0u8; 5];
    let mut got = 0;
    while got < 5 {
        match r.read(&mut head[got..])? {
            0 if got == 0 => return Ok(None),
            0 => return Err(bad("a frame's header is cut short")),
            n => got += n,
        }
    }
    if !tags.contains(&head[0]) {
        return Err(bad("an unknown frame"));
    }
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_FRAME {
        return Err(bad("a frame over 64 KiB"));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).map_err(|_| bad("a frame is cut short"))?;
    Ok(Some((head[0], payload)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_foreign_stream_is_refused() {
        let mut b = Vec::new();
        write_frame(&mut b, PID, b"42").unwrap();
        write_frame(&mut b, STDOUT, b"hi\n\xff").unwrap();
        write_frame(&mut b, EXIT, b"signal 9").unwrap();
        let mut r = &b[..];
        assert_eq!(read_frame(&mut r).unwrap(), Some((PID, b"42".to_vec())));
        assert_eq!(read_frame(&mut r).unwrap(), Some((STDOUT, b"hi\n\xff".to_vec())));
        assert_eq!(read_frame(&mut r).unwrap(), Some((EXIT, b"signal 9".to_vec())));
        assert_eq!(read_frame(&mut r).unwrap(), None);
        let bad = |b: &[u8]| read_frame(&mut &b[..]).unwrap_err().kind();
        assert_eq!(bad(b"z\0\0\0\0"), io::ErrorKind::InvalidData, "unknown tag");
        assert_eq!(bad(b"o\0\x01\0\x01"), io::ErrorKind::InvalidData, "over 64 KiB");
        assert_eq!(bad(b"o\0\0\0\x05ab"), io::ErrorKind::InvalidData, "cut short");
        assert_eq!(bad(b"o\0"), io::ErrorKind::InvalidData, "header cut short");
        assert_eq!(bad(b"i\0\0\0\0"), io::ErrorKind::InvalidData, "input is not output");
    }

    #[test]
    fn input_frames_round_trip_and_output_tags_are_not_input() {
        let mut b = Vec::new();
        write_frame(&mut b, INPUT, b"\x1b[A\0").unwrap();
        write_frame(&mut b, RESIZE, b"100 30").unwrap();
        write_frame(&mut b, CLOSE, b"").unwrap();
        let mut r = &b[..];
        assert_eq!(read_input(&mut r).unwrap(), Some((INPUT, b"\x1b[A\0".to_vec())));
        assert_eq!(read_input(&mut r).unwrap(), Some((RESIZE, b"100 30".to_vec())));
        assert_eq!(read_input(&mut r).unwrap(), Some((CLOSE, vec![])));
        assert_eq!(read_input(&mut r).unwrap(), None);
        assert_eq!(read_input(&mut &b"o\0\0\0\0"[..]).unwrap_err().kind(), io::ErrorKind::InvalidData);
    }
}
