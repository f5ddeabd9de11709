//! A minimal sbx sandbox program: binds the channel socket sbx gives every
//! sandbox (`$SBX_SOCKET`, `/run/sandbox/sandbox.sock`) and answers each line
//! it receives with `echo: <line>`, line by line, for any number of
//! connections. std only, so `pack.sh` can link it statically and ship it
//! alone in an image: no shell, no libc, nothing else for an agent to use.
//!
//! sbx's `create` returns once the socket is bound, so bind it first and do
//! any slow start-up after.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};

fn main() {
    let path = std::env::var("SBX_SOCKET").unwrap_or_else(|_| "/run/sandbox/sandbox.sock".into());
    // A socket left by an earlier run of this program would make bind fail.
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("line-echo: cannot bind {path}: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("line-echo: listening on {path}");
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                std::thread::spawn(move || serve(stream));
            }
            Err(e) => eprintln!("line-echo: accept: {e}"),
        }
    }
}

/// One connection: answer every line as soon as it arrives (no waiting for
/// the client to close its side), stop at end of input.
fn serve(stream: UnixStream) {
    let Ok(mut out) = stream.try_clone() else { return };
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        if writeln!(out, "echo: {line}").and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}
