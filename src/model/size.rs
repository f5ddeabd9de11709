//! Sizes as flags give them.

/// A size flag (`--max-bytes`, `--persist-size`): a number of bytes with an optional K/M/G/T suffix
/// (powers of 1024; `KiB`, `K`, `KB` all mean 1024).
pub fn parse_bytes(s: &str) -> Result<u64, crate::model::invalid::Invalid> {
    let bad =
        || crate::model::invalid::Invalid::new("size", s, "expected bytes, optionally with a suffix: 512M, 4GiB, 1T");
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let shift = match unit.trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(bad()),
    };
    let v = n.checked_mul(1u64 << shift).ok_or_else(bad)?;
    if v == 0 {
        return Err(crate::model::invalid::Invalid::new("size", s, "must be more than 0"));
    }
    Ok(v)
}
