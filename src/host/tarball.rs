//! The one-file tars sbx copies into a remote engine's volumes with
//! `docker cp`: the helper, an egress gate's policy.

/// A tar of one regular file `name`, root-owned, of `mode`, with fixed
/// metadata (mtime 0), so the same bytes give the same tar.
pub fn root_file(name: &str, mode: u32, bytes: &[u8]) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(bytes.len() as u64);
    h.set_cksum();
    let mut b = tar::Builder::new(Vec::new());
    // Appending to a Vec cannot fail.
    b.append_data(&mut h, name, bytes).expect("tar into memory");
    b.into_inner().expect("tar into memory")
}
