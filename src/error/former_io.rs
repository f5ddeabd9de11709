//! The errors that were `HostError::Io` (or `SocketError::Io`) around a
//! made-up `io::Error` and now have a variant of their own say, exit and
//! hint exactly what the old error did: scripts match the text and kind.

use std::io::ErrorKind;
use std::path::PathBuf;

use super::*;

/// `new` says, exits and hints as `old` did.
fn same(new: Error, old: Error) {
    assert_eq!(new.to_string(), old.to_string());
    assert_eq!((new.kind(), new.exit_code(), new.hint()), (old.kind(), old.exit_code(), old.hint()));
}

#[test]
fn not_bound_is_the_not_found_it_was() {
    let path = PathBuf::from("/run/sbx/s-0123/sandbox.sock");
    let old = SocketError::Io {
        path: path.clone(),
        source: std::io::Error::new(ErrorKind::NotFound, "the sandbox has not bound its socket"),
    };
    same(SocketError::NotBound { path }.into(), old.into());
}

#[test]
fn not_tried_is_the_io_error_it_was() {
    let old = Error::io("removing sandboxes", std::io::Error::other(NOT_TRIED));
    same(SandboxError::NotTried.into(), old);
    assert_eq!(
        Error::from(SandboxError::NotTried).to_string(),
        "removing sandboxes: not tried: the engine did not answer an earlier batch"
    );
}

#[test]
fn helper_output_is_the_io_error_it_was() {
    // The line comes from the sandbox: quotes and control characters included.
    for line in ["not json", "{\"handle\":\"p1\"", "\u{1b}[2J\"quoted\"\n"] {
        let parse = || serde_json::from_str::<std::collections::BTreeMap<String, u8>>(line).unwrap_err();
        let old = Error::io(format!("reading the helper's ps output {line:?}"), parse().into());
        same(SandboxError::HelperOutput { what: "ps", line: line.into(), source: parse() }.into(), old);
    }
}

#[test]
fn not_tar_is_the_io_error_it_was() {
    for command in ["restore", "cp"] {
        let reason = "stdin is not a tar archive (0 bytes)";
        let old = Error::io(command, std::io::Error::new(ErrorKind::InvalidData, reason));
        same(TransferError::NotTar { command, reason: reason.into() }.into(), old);
    }
}

#[test]
fn json_encoding_is_the_io_error_it_was() {
    // A map with non-string keys does not encode as JSON.
    let encode = || serde_json::to_string(&std::collections::BTreeMap::from([(vec![1u8], 1u8)])).unwrap_err();
    for context in ["encoding JSON", "probe"] {
        let old = Error::io(context, encode().into());
        same(HostError::Json { context: context.into(), source: encode() }.into(), old);
    }
}

#[test]
fn transfer_refusals_are_the_io_errors_they_were() {
    let context = "copying sbx-0123456789ab:/tmp/a to out";
    for (kind, reason) in [
        (ErrorKind::InvalidData, "refusing entry \"../x\": it is not below \"a\""),
        (ErrorKind::UnexpectedEof, "the stream ended in the middle of a file"),
        (ErrorKind::Other, "\"a\" is 2.0 GiB and would bring the copy to 2.0 GiB, over the cap of 1.0 GiB"),
    ] {
        let old = Error::io(context, std::io::Error::new(kind, reason));
        same(TransferError::Refused { context: context.into(), reason: reason.into() }.into(), old);
    }
}
