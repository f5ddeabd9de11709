//! One exclusive `flock` on a file of sbx's data dir, made 0600 if missing:
//! what serialises read-modify-write of a record between sbx processes.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

use crate::error::{Error, Result};

/// Wait for and hold the lock on `path` until the value is dropped.
pub fn exclusive(path: &Path) -> Result<Flock<File>> {
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    Flock::lock(f, FlockArg::LockExclusive).map_err(|(_, e)| Error::io(format!("locking {}", path.display()), e.into()))
}

/// [`exclusive`] without waiting: None while another holds it. `create`:
/// make the file when missing (else a missing file is None too).
pub fn try_exclusive(path: &Path, create: bool) -> Result<Option<Flock<File>>> {
    let opened = File::options().create(create).truncate(false).write(true).mode(0o600).open(path);
    let f = match opened {
        Ok(f) => f,
        Err(e) if !create && e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
    };
    match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
        Ok(held) => Ok(Some(held)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(Error::io(format!("locking {}", path.display()), e.into())),
    }
}
