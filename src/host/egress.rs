//! A sandbox's egress policy on the host: `<data dir>/egress/<id>/policy.json`,
//! the directory bind-mounted read-only at /policy in its gate. Rewritten
//! atomically (a new file renamed over the old one, inside the directory,
//! so the gate sees one whole policy or the other). 0755/0644: it holds no
//! secret and the gate reads it as 65534.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{EgressError, Error, Result};
use crate::spec::egress::Policy;

const FILE: &str = "policy.json";

/// The directory of all policy directories.
pub fn root(data: &Path) -> PathBuf {
    data.join("egress")
}

/// Sandbox `id`'s policy directory.
pub fn dir(data: &Path, id: &str) -> PathBuf {
    root(data).join(id)
}

/// Write `policy` for sandbox `id`, making its directory if needed; returns the directory.
pub fn write(data: &Path, id: &str, policy: &Policy) -> Result<PathBuf> {
    let d = dir(data, id);
    let io = |what: &str, p: &Path, e| Error::io(format!("{what} {}", p.display()), e);
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(&d).map_err(|e| io("creating", &d, e))?;
    let meta = std::fs::symlink_metadata(&d).map_err(|e| io("reading", &d, e))?;
    if !meta.is_dir() {
        return Err(io("using", &d, std::io::Error::other("not a directory")));
    }
    // Whatever the umask: the gate reads it as 65534.
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).map_err(|e| io("creating", &d, e))?;
    let tmp = d.join(format!(".{FILE}.{}", std::process::id()));
    let file = d.join(FILE);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o644).open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        f.write_all(policy.to_json().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &file)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("writing", &file, e));
    }
    Ok(d)
}

/// Sandbox `id`'s policy as the gate reads it.
pub fn read(data: &Path, id: &str) -> Result<Policy> {
    let file = dir(data, id).join(FILE);
    let text = std::fs::read_to_string(&file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            EgressError::Policy { id: id.to_string(), reason: format!("{} is gone", file.display()) }.into()
        }
        _ => Error::io(format!("reading {}", file.display()), e),
    })?;
    Policy::from_json(&text).map_err(|reason| EgressError::Policy { id: id.to_string(), reason }.into())
}

/// Remove sandbox `id`'s policy directory; already gone is fine.
pub fn remove(data: &Path, id: &str) -> Result<()> {
    let d = dir(data, id);
    match std::fs::remove_dir_all(&d) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(format!("removing {}", d.display()), e)),
        _ => Ok(()),
    }
}

/// The sandbox ids that have a policy directory (names sbx makes only).
pub fn ids(data: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root(data))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| crate::spec::parse_id(n).is_ok())
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::egress::{AllowRule, Mode};

    #[test]
    fn write_read_remove() {
        let data = std::env::temp_dir().join(format!("sbx-egress-{}-{}", std::process::id(), rand::random::<u32>()));
        let id = "sbx-0123456789ab";
        let mut p = Policy { mode: Mode::Enforce, rules: vec![] };
        p.allow(&[AllowRule::parse("pypi.org", false).unwrap()]);
        let d = write(&data, id, &p).unwrap();
        assert_eq!(read(&data, id).unwrap(), p);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&d), mode(&d.join(FILE))), (0o755, 0o644));
        p.deny(&p.rules.clone());
        write(&data, id, &p).unwrap();
        assert_eq!(read(&data, id).unwrap().rules, vec![]);
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "no temporary file left");
        std::fs::create_dir_all(root(&data).join("not-an-id")).unwrap();
        assert_eq!(ids(&data), [id]);
        remove(&data, id).unwrap();
        remove(&data, id).unwrap();
        assert!(matches!(read(&data, id), Err(Error::Egress(EgressError::Policy { .. }))));
        std::fs::remove_dir_all(&data).unwrap();
    }
}
