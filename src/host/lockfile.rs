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
