//! A terminal-attached call's streams, passed through as they come except
//! for docker's own message, which is held back (see [`forward`]).

use std::io::Read;

/// How docker's own messages begin when `docker exec` or `docker logs`
/// could not do its job (engine 20.10 prints the OCI one on stdout).
const DOCKER_SAYS: &[&[u8]] =
    &[b"Error response from daemon: ", b"OCI runtime exec failed", b"Error: No such container"];
/// Docker's messages are short; a longer stream is the command's own output.
const HOLD_MAX: usize = 4096;

#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// Could still become one of docker's messages.
    Undecided,
    Docker,
    Other,
}

fn head_of(held: &[u8]) -> Head {
    if DOCKER_SAYS.iter().any(|p| held.starts_with(p)) {
        Head::Docker
    } else if DOCKER_SAYS.iter().any(|p| p.starts_with(held)) {
        Head::Undecided
    } else {
        Head::Other
    }
}

/// Copy a child's stream to ours as it comes (binary-safe, flushed per
/// read), except a stream that begins with one of docker's own messages:
/// that is held back and returned, so sbx can say it in its own words;
/// the caller writes it out should it be the command's.
pub(super) fn forward<R, W, F>(mut from: R, to: F) -> std::thread::JoinHandle<String>
where
    R: Read + Send + 'static,
    W: std::io::Write,
    F: FnOnce() -> W + Send + 'static,
{
    std::thread::spawn(move || {
        let mut to = to();
        let mut held = Vec::new();
        let mut deciding = true;
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            let chunk = if deciding {
                held.extend_from_slice(&buf[..n]);
                match head_of(&held) {
                    Head::Docker if held.len() <= HOLD_MAX => continue,
                    Head::Undecided => continue,
                    _ => {
                        deciding = false;
                        std::mem::take(&mut held)
                    }
                }
            } else {
                buf[..n].to_vec()
            };
            if to.write_all(&chunk).and_then(|()| to.flush()).is_err() {
                break;
            }
        }
        if deciding && head_of(&held) != Head::Docker {
            let _ = to.write_all(&held).and_then(|()| to.flush());
            held.clear();
        }
        String::from_utf8_lossy(&held).into_owned()
    })
}
