//! Builds `helper/sbx_helper.rs` as a static binary for the target, to be
//! embedded in sbx and mounted read-only into every sandbox (see
//! `src/host/helper.rs`). Std only, so plain rustc builds it: no crates to fetch.
//! Without a static C library (Debian: `libc6-dev`) the build fails and says
//! so (it used to build an empty helper and fail at run time);
//! `SBX_NO_HELPER=1` builds without one on purpose, and the commands that
//! need it then say so at run time.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=helper/sbx_helper.rs");
    println!("cargo:rerun-if-changed=helper/fsops.rs");
    // The record stream's format, shared with the host through `#[path]`.
    println!("cargo:rerun-if-changed=src/workbench/transfer/wire.rs");
    println!("cargo:rerun-if-changed=src/workbench/transfer/wire_decode.rs");
    println!("cargo:rerun-if-changed=src/workbench/mux.rs");
    println!("cargo:rerun-if-env-changed=SBX_NO_HELPER");
    let opt_out = std::env::var_os("SBX_NO_HELPER").is_some_and(|v| v == "1");
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
        .output();
    match status {
        Ok(o) if o.status.success() => {}
        _ if opt_out => {
            println!("cargo:warning=SBX_NO_HELPER=1: building without the in-sandbox helper; exec -d, cp, backup, port-forward and friends will be unavailable");
            std::fs::write(&out, b"").expect("write placeholder helper");
        }
        other => {
            let why = match other {
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => format!("could not run rustc: {e}"),
            };
            eprintln!(
                "error: could not build sbx's static in-sandbox helper (helper/sbx_helper.rs).\n\
                 It needs a static C library for the target {target}: on Debian or Ubuntu \
                 `apt-get install libc6-dev` (Fedora: glibc-static; Alpine: musl-dev).\n\
                 To build sbx without it on purpose (exec -d, cp, backup, restore, logs of \
                 background processes, port-forward and wait-port then fail at run time), set SBX_NO_HELPER=1.\n\
                 rustc said:\n{why}"
            );
            std::process::exit(1);
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
