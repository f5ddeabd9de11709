//! Builds `helper/sbx_helper.rs` as a static binary for the target, to be
//! embedded in sbx and mounted read-only into every sandbox (see
//! `src/helper.rs`). Std only, so plain rustc builds it: no crates to fetch.
//! Without a static C library the helper is left empty and the commands that
//! need it say so at run time.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=helper/sbx_helper.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("sbx-helper");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = std::env::var("TARGET").unwrap_or_default();
    let status = Command::new(rustc)
        .args([
            "--edition",
            "2021",
            "-C",
            "opt-level=2",
            "-C",
            "target-feature=+crt-static",
            "-C",
            "strip=symbols",
            "-C",
            "panic=abort",
        ])
        .args(["--target", &target])
        .arg("-o")
        .arg(&out)
        .arg("helper/sbx_helper.rs")
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => {
            println!("cargo:warning=could not build the static in-sandbox helper ({other:?}); exec -d, cp, port-forward and friends will be unavailable (install a static libc, e.g. Debian's libc6-dev)");
            std::fs::write(&out, b"").expect("write placeholder helper");
        }
    }
    // A content key, so each helper version is installed once under its own name.
    let bytes = std::fs::read(&out).expect("read helper");
    let mut h: u64 = 0xcbf29ce484222325;
    for b in &bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    let key = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("sbx-helper.key");
    std::fs::write(key, format!("{h:016x}")).expect("write helper key");
}
