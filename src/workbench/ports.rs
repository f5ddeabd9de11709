//! The sandbox side of `sbx port-forward` and `wait-port`: the helper
//! relays one connection, or waits until something listens.

use std::ffi::OsString;

use crate::error::Result;

use super::helper::{check_helper, drain, helper_argv, or_ended, run_stream};
use super::Target;

pub fn wait_port(t: &Target, port: u16, timeout: std::time::Duration) -> Result<bool> {
    let argv = helper_argv(t, false, &["wait-port", &port.to_string(), &timeout.as_millis().to_string()]);
    // Streamed (it answers only at the end), for its idle deadline:
    // docker/deadline.rs.
    let r = run_stream(t, &argv, None, &mut drain)?;
    let out = crate::docker::Output { status: r.status, stdout: Vec::new(), stderr: r.stderr };
    match out.status {
        0 => Ok(true),
        1 if out.stderr_str().is_empty() => Ok(false),
        _ => check_helper(t, &argv, &out).map(|()| false).map_err(|e| or_ended(t, e)),
    }
}

/// The argv of one port-forward relay: stdin/stdout <-> 127.0.0.1:PORT in the sandbox.
pub fn relay_argv(t: &Target, port: u16) -> Vec<OsString> {
    helper_argv(t, true, &["relay", &port.to_string()])
}
