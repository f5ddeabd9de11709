//! `sbx stats`: docker's figures for each sandbox, the missing ones named.

use crate::docker::{argv, parse, run_ok, DockerExec};
use crate::error::SandboxError;
use crate::error::{Error, Result};

pub use crate::docker::parse::Stats;

pub fn stats(exec: &dyn DockerExec, ids: &[String]) -> Result<Vec<Stats>> {
    let argv = argv::stats(ids);
    let out = run_ok(exec, &argv).map_err(|e| match &e {
        crate::error::DockerError::Status { stderr, .. } if crate::docker::parse::no_such_container(stderr) => {
            Error::Sandbox(SandboxError::NotFound { id: ids.join(" ") })
        }
        _ => e.into(),
    })?;
    Ok(parse::stats(&out.stdout_str()))
}

/// [`stats`] of those of `ids` that exist, and the ones docker says are
/// gone: `docker stats A B` prints nothing at all when B is missing, so
/// the missing are dropped and the rest asked again.
pub fn stats_present(exec: &dyn DockerExec, ids: &[String]) -> Result<(Vec<Stats>, Vec<String>)> {
    let mut left = ids.to_vec();
    let mut missing = Vec::new();
    while !left.is_empty() {
        let out = exec.run(&argv::stats(&left))?;
        if out.status == 0 {
            return Ok((parse::stats(&out.stdout_str()), missing));
        }
        let stderr = out.stderr_str();
        let gone: Vec<String> = left.iter().filter(|id| parse::names_missing(&stderr, id)).cloned().collect();
        if gone.is_empty() {
            return run_ok(exec, &argv::stats(&left))
                .map(|o| (parse::stats(&o.stdout_str()), missing))
                .map_err(Into::into);
        }
        left.retain(|id| !gone.contains(id));
        missing.extend(gone);
    }
    Ok((Vec::new(), missing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;

    /// `sbx stats MISSING LIVE` named both as missing.
    #[test]
    fn stats_of_a_missing_and_a_live_sandbox_shows_the_live_one() {
        let f = FakeDocker::new();
        let live = "a".repeat(64);
        let gone = "b".repeat(64);
        f.push(Output::fail(1, &format!("Error response from daemon: No such container: {gone}\n")));
        f.push(Output::ok(&format!("{{\"Name\":\"sbx-0123456789ab\",\"ID\":\"{live}\",\"PIDs\":\"2\"}}\n")));
        let (s, missing) = stats_present(&f, &[gone.clone(), live.clone()]).unwrap();
        assert_eq!(missing, vec![gone.clone()]);
        assert_eq!((s.len(), s[0].pids), (1, 2));
        assert_eq!(f.calls()[1], ["stats", "--no-stream", "--format", "{{json .}}", "--", live.as_str()]);
    }
}
