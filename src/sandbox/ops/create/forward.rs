//! Create's forwarders (see `model::forward`): sbx's image made ready
//! before anything of the sandbox exists, each forwarder started on the
//! sandbox's private network while the sandbox starts, then connected to
//! its upstream network, where the service is, before `--setup` runs.

use std::path::{Path, PathBuf};

use super::routes::Forward;
use crate::docker::{argv, run_ok, Background, DockerError};
use crate::error::{Error, Result};
use crate::model::forward;
use crate::sandbox::Driver;

/// What the forwarders need that create resolves before the sandbox exists.
pub(super) struct ForwardReady {
    image: String,
    /// sbx's own seccomp profile (never `--seccomp-profile`'s).
    seccomp: PathBuf,
}

/// The forwarders' `docker run`s in the background.
pub(super) struct ForwardJobs<'a> {
    jobs: Vec<(Box<dyn Background>, &'a Forward)>,
}

impl Driver {
    /// sbx's image (`image`: the egress gate's, when create has it already)
    /// and the data dir's mark that has gc look for forwarders; None
    /// without `forwards`.
    pub(super) fn prepare_forwards(
        &self,
        data: &Path,
        forwards: &[Forward],
        image: Option<&str>,
    ) -> Result<Option<ForwardReady>> {
        if forwards.is_empty() {
            return Ok(None);
        }
        let mark = data.join(forward::MARK);
        std::fs::write(&mark, b"").map_err(|e| Error::io(format!("writing {}", mark.display()), e))?;
        let image = match image {
            Some(i) => i.to_string(),
            None => self.self_image()?,
        };
        Ok(Some(ForwardReady { image, seccomp: crate::host::seccomp::install(data)? }))
    }

    /// Start every forwarder in the background; the sandbox starts meanwhile.
    pub(super) fn spawn_forwarders<'a>(
        &self,
        id: &str,
        owner: &str,
        ready: Option<&ForwardReady>,
        forwards: &'a [Forward],
        uid: u32,
    ) -> Result<Option<ForwardJobs<'a>>> {
        let Some(ready) = ready else { return Ok(None) };
        let mut jobs = Vec::new();
        for f in forwards {
            let plan = argv::ForwardPlan {
                id,
                owner,
                image: &ready.image,
                seccomp: &ready.seccomp,
                network: &f.network,
                alias: &f.alias,
                ports: &f.ports,
                uid,
            };
            jobs.push((self.docker.spawn(&argv::forward_run(&plan))?, f));
        }
        Ok(Some(ForwardJobs { jobs }))
    }

    /// Every forwarder's `docker run` answered; each is then connected to
    /// its upstream network (after its start: it listens only on the
    /// sandbox's side). Every job is waited for, so a rollback never races one.
    pub(super) fn forwarders_started(&self, started: Option<ForwardJobs<'_>>) -> Result<()> {
        let Some(started) = started else { return Ok(()) };
        let mut first = None;
        let mut ran = Vec::new();
        for (job, f) in started.jobs {
            let out = job.wait().map_err(Error::from).and_then(|out| match out.status {
                0 => Ok(()),
                status => {
                    let command = format!("starting the forwarder of {} (`docker run`)", f.network);
                    Err(DockerError::Status { command, status, stderr: out.stderr_str() }.into())
                }
            });
            match out {
                Ok(()) => ran.push(f),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first {
            return Err(e);
        }
        for f in ran {
            self.check_interrupt()?;
            let up = forward::upstream(&f.network);
            run_ok(&*self.docker, &argv::network_connect(&up, &forward::container(&f.network)))?;
        }
        Ok(())
    }
}
