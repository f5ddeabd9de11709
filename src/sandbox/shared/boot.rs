//! Create's start: `docker run` (or create, connect, start), the check of
//! where the mounts landed, the wait for the socket, and `--setup`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::docker::argv::remote;
use crate::docker::parse::{self, MainState};
use crate::docker::{argv, run_ok, Output};
use crate::error::{DockerError, Error, Result};
use crate::error::{ImageError, SandboxError};
use crate::host::channel::{self, Kind};
use crate::host::socket;
use crate::model::paths;
use crate::model::runtime::Family;
use crate::sandbox::{unique, Driver};

/// What the readiness checks need of a sandbox, whether `create` just made
/// it (from its plan) or `sbx start` runs it again (from its labels).
pub(in crate::sandbox) struct Boot<'a> {
    pub id: &'a str,
    pub image: &'a str,
    /// The sandbox user, who may own its socket.
    pub uid: u32,
    pub socket_path: &'a Path,
    pub socket_wait: Duration,
    /// sbx's helper is mounted at /run/sbx.
    pub helper: bool,
    pub family: Family,
    pub channel: Kind,
    /// The engine is remote: its /proc is not this machine's, and the
    /// mounts were checked before start (`check_remote_layout`).
    pub remote: bool,
}

impl<'a> Boot<'a> {
    pub(in crate::sandbox) fn of(plan: &'a argv::RunPlan) -> Self {
        Boot {
            id: plan.id,
            image: plan.spec.image.as_str(),
            uid: plan.uid,
            socket_path: plan.socket_path,
            socket_wait: plan.spec.socket_wait,
            helper: plan.helper.is_some(),
            family: plan.family,
            channel: plan.channel,
            remote: false,
        }
    }
}

/// What `docker container inspect` said of the sandbox's main process.
enum MainProcess {
    Running(i32),
    /// It exited: the error that says so, with its logs.
    Exited(Error),
}

impl Driver {
    /// `--setup` commands, in order, in the ready sandbox. Their output goes
    /// to stderr, so stdout stays the id alone.
    pub(in crate::sandbox) fn run_setup(&self, id: &str, setup: &[Vec<String>]) -> Result<()> {
        for argv in setup {
            self.check_interrupt()?;
            let args = argv::exec(id, &argv::ExecOpts::default(), argv);
            let out = self.docker.run(&args)?;
            let text = inert(&format!("{}{}", out.stdout_str(), String::from_utf8_lossy(&out.stderr)));
            if !text.is_empty() {
                eprint!("{text}");
            }
            if out.status != 0 {
                let code = parse::exec_status(out.status, &text);
                return Err(Error::Sandbox(SandboxError::SetupFailed {
                    command: argv.join(" "),
                    code,
                    output: text.trim_end().to_string(),
                }));
            }
        }
        Ok(())
    }

    /// Start the sandbox and wait for its socket; returns the container id.
    /// `remote`: the engine is remote, and whether its helper is
    /// the readable copy: the sandbox is created, its /run checked through
    /// `docker cp` (`check_remote_layout`, instead of this machine's /proc),
    /// then started.
    pub(in crate::sandbox) fn start_and_wait(&self, plan: &argv::RunPlan, remote: Option<bool>) -> Result<String> {
        if let Some(from) = &plan.spec.restore {
            return self.start_restored(plan, from);
        }
        self.check_interrupt()?;
        let nets = unique(plan.networks.iter().map(|r| r.network.clone()));
        // The image was seen before (its user is cached) but may be gone since.
        let missing = |e: DockerError| match &e {
            DockerError::Status { stderr, .. } if parse::image_missing_at_run(stderr) => {
                Error::Image(ImageError::Missing { image: plan.spec.image.as_str().to_string() })
            }
            _ => e.into(),
        };
        let cid = if nets.len() <= 1 && remote.is_none() {
            run_ok(&*self.docker, &argv::container(plan, true)).map_err(missing)?.stdout_str().trim().to_string()
        } else {
            let cid =
                run_ok(&*self.docker, &argv::container(plan, false)).map_err(missing)?.stdout_str().trim().to_string();
            if let Some(readable) = remote {
                self.check_interrupt()?;
                self.check_remote_layout(&cid, plan.spec.image.as_str(), readable)?;
            }
            for net in nets.iter().skip(1) {
                self.check_interrupt()?;
                run_ok(&*self.docker, &argv::network_connect(net, plan.id))?;
            }
            self.check_interrupt()?;
            run_ok(&*self.docker, &argv::start(plan.id))?;
            cid
        };
        self.await_ready(&Boot { remote: remote.is_some(), ..Boot::of(plan) }, &cid)?;
        Ok(cid)
    }

    /// After `docker run`/`start` (create's, and `sbx start`'s: with
    /// `--restart no` these are the only places sbx starts a sandbox): where
    /// the mounts landed, then the socket.
    pub(in crate::sandbox) fn await_ready(&self, boot: &Boot, cid: &str) -> Result<()> {
        let relayed = boot.channel == Kind::Exec && !boot.socket_wait.is_zero();
        if relayed && !boot.remote {
            // The first probe runs while the mounts are checked (the
            // engine's exec costs what the check does) and counts only
            // once they passed: until then the helper it ran may be the
            // image's own. A probe adds no host process the check could
            // take for gVisor's gofer: runsc runs it as a task of the
            // Sentry, under the Sentry's mount namespace (measured).
            let started = Instant::now();
            let first = self.docker.spawn(&channel::probe_argv(cid, boot.socket_wait.min(PROBE_WAIT)))?;
            if let Err(e) = self.check_mounts(boot, cid) {
                // Not waited for: with a mount redirected, the helper it
                // ran may be the image's own, and may never answer.
                drop(first);
                return Err(e);
            }
            let answered = first.wait();
            return self.wait_for_relayed_socket(boot, cid, started, Some(answered?));
        }
        if !boot.remote {
            self.check_mounts(boot, cid)?;
        }
        if boot.socket_wait.is_zero() {
            self.check_interrupt()
        } else if relayed {
            self.wait_for_relayed_socket(boot, cid, Instant::now(), None)
        } else {
            self.wait_for_socket(boot)
        }
    }

    /// Runc places mounts by following the image's
    /// symlinks, so read where the kernel really put sbx's mounts, from the
    /// host's /proc/PID/mountinfo of the sandbox's main process (kernel
    /// data the sandbox cannot forge), and refuse an image that moved them.
    ///
    /// Under gVisor the host process is the Sentry, whose mountinfo is not
    /// the workload's; but gVisor follows the image's symlinks too, inside
    /// the sandbox: an image linking /run/sbx to /tmp/a/sbx got the helper
    /// mounted there, renamed /tmp/a away, and `sbx ps` ran its own
    /// /tmp/a/sbx/helper (attack finding 1). So there sbx reads
    /// the mount table of gVisor's gofer, which places the bind mounts on
    /// the host exactly where the Sentry shows them (see `host::gvisor`).
    fn check_mounts(&self, plan: &Boot, cid: &str) -> Result<()> {
        self.check_interrupt()?;
        let pid = match self.main_process(plan, cid)? {
            MainProcess::Running(pid) => pid,
            MainProcess::Exited(died) => return Err(died),
        };
        let (image, helper) = (plan.image, plan.helper);
        let checked = if plan.family == Family::Gvisor {
            let direct = (plan.channel == Kind::Direct).then_some(argv::SANDBOX_SOCKET_DIR);
            crate::host::gvisor::gofer_mountinfos(&self.proc, pid, cid)
                .map_err(|e| Error::io(format!("reading the mount tables of {}'s processes", plan.id), e))
                .and_then(|infos| {
                    if infos.is_empty() {
                        let none = std::io::Error::new(std::io::ErrorKind::NotFound, "no gVisor gofer in its cgroup");
                        return Err(Error::io(format!("finding where gVisor placed {}'s mounts", plan.id), none));
                    }
                    infos
                        .iter()
                        .try_for_each(|info| crate::host::mounts::check_gofer_mounts(info, image, helper, direct))
                })
        } else {
            let path = self.proc.join(pid.to_string()).join("mountinfo");
            std::fs::read_to_string(&path)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))
                .and_then(|info| crate::host::mounts::check_mounts(&info, image, helper, argv::SANDBOX_SOCKET_DIR))
        };
        if checked.is_err() {
            // The sandbox may have exited between the look-up and the read
            // (its /proc entry gone, or the pid already someone else's): that
            // is a boot crash, not a redirected image. Only a failure read
            // from the same, still running process stands.
            match self.main_process(plan, cid)? {
                MainProcess::Exited(died) => return Err(died),
                MainProcess::Running(again) if again != pid => {
                    return Err(Error::Sandbox(SandboxError::DiedAtBoot {
                        id: plan.id.to_string(),
                        code: -1,
                        logs: self.logs(plan.id),
                    }))
                }
                MainProcess::Running(_) => {}
            }
        }
        checked
    }

    /// The sandbox's main process: under runc read from this machine's
    /// /proc (`host::init_pid`), else from one `docker container inspect`,
    /// which also says how it exited.
    fn main_process(&self, plan: &Boot, cid: &str) -> Result<MainProcess> {
        if plan.family == Family::Runc {
            if let Some(pid) = crate::host::init_pid::container_init(&self.proc, &self.cgroups, cid) {
                return Ok(MainProcess::Running(pid));
            }
        }
        let args = argv::running_pid(plan.id);
        let out = run_ok(&*self.docker, &args)?;
        match parse::main_state(&out.stdout_str()) {
            MainState::Running(pid) => Ok(MainProcess::Running(pid)),
            MainState::Stopped(code) => Ok(MainProcess::Exited(Error::Sandbox(SandboxError::DiedAtBoot {
                id: plan.id.to_string(),
                code,
                logs: self.logs(plan.id),
            }))),
            MainState::Unknown => Err(DockerError::Parse {
                command: crate::docker::render(&args),
                reason: format!("expected `PID STATUS EXITCODE`, got {:?}", out.stdout_str().trim()),
            }
            .into()),
        }
    }

    /// Poll for the socket (2 ms, backing off to 20 ms). Most sandboxes bind
    /// within a few hundred ms, so the container's state is asked only from
    /// 250 ms on, every 500 ms: a boot crash is still reported within half a
    /// second, without a `docker wait` process competing with the engine
    /// during every start.
    fn wait_for_socket(&self, plan: &Boot) -> Result<()> {
        let owners = socket::allowed_owners(Some(plan.uid));
        let started = Instant::now();
        let mut next_check = Duration::from_millis(250);
        let mut delay = Duration::from_millis(2);
        // Bound, but not writable by sbx's user: not ready for its caller.
        let mut not_yours = None;
        loop {
            self.check_interrupt()?;
            if let Some((fd, _)) = socket::open_checked(plan.socket_path, &owners)? {
                match socket::may_connect(&fd) {
                    Ok(()) => return Ok(()),
                    Err(e) => not_yours = Some(e),
                }
            }
            if started.elapsed() >= next_check {
                next_check += Duration::from_millis(500);
                if let Some(e) = self.died_at_boot(plan.id)? {
                    return Err(e);
                }
            }
            if started.elapsed() >= plan.socket_wait {
                if let Some(reason) = not_yours {
                    let uid = nix::unistd::geteuid().as_raw();
                    return Err(socket::not_yours(plan.socket_path, uid, reason).into());
                }
                return Err(Error::Sandbox(SandboxError::SocketTimeout {
                    id: plan.id.to_string(),
                    socket: plan.socket_path.display().to_string(),
                    waited: humantime::format_duration(plan.socket_wait).to_string(),
                    logs: self.logs(plan.id),
                }));
            }
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_millis(20));
        }
    }

    /// Readiness through the relayed channel: the helper
    /// polls for the socket inside the sandbox for up to 500 ms per `docker
    /// exec`, refusing anything there that is not a socket; between execs
    /// the container's state is checked, so a boot crash is reported as
    /// promptly as on the direct path.
    fn wait_for_relayed_socket(&self, plan: &Boot, cid: &str, started: Instant, first: Option<Output>) -> Result<()> {
        use channel::{probe_argv, relay_status, HELPER_NO_SOCKET};
        let mut first = first;
        loop {
            self.check_interrupt()?;
            let left = plan.socket_wait.saturating_sub(started.elapsed());
            let out = match first.take() {
                Some(out) => out,
                None => self.docker.run(&probe_argv(cid, left.min(PROBE_WAIT)))?,
            };
            if out.status == 0 {
                return Ok(());
            }
            if let Some(e) = self.died_at_boot(plan.id)? {
                return Err(e);
            }
            if out.status != HELPER_NO_SOCKET {
                relay_status(plan.id, out.status, &out.stderr_str(), Duration::ZERO)?;
            }
            if started.elapsed() >= plan.socket_wait {
                return Err(Error::Sandbox(SandboxError::SocketTimeout {
                    id: plan.id.to_string(),
                    socket: format!("{} (inside the sandbox)", argv::SANDBOX_SOCKET),
                    waited: humantime::format_duration(plan.socket_wait).to_string(),
                    logs: self.logs(plan.id),
                }));
            }
        }
    }

    /// The boot crash, with its logs, once the container stopped; one `docker container inspect`.
    fn died_at_boot(&self, id: &str) -> Result<Option<Error>> {
        let out = self.docker.run(&argv::state(id))?;
        Ok(parse::stopped(&out.stdout_str())
            .map(|code| Error::Sandbox(SandboxError::DiedAtBoot { id: id.to_string(), code, logs: self.logs(id) })))
    }

    fn logs(&self, id: &str) -> String {
        match self.docker.run(&argv::logs(id, false, Some(argv::LOG_TAIL))) {
            Ok(out) => inert(&format!("{}{}", out.stdout_str(), String::from_utf8_lossy(&out.stderr))),
            Err(e) => format!("(logs unavailable: {e})"),
        }
    }

    /// A redirected mount, without this machine's /proc: the created (not yet
    /// started, so nothing of the image has run) sandbox's /run as `docker
    /// cp` gives it, with its volumes mounted where the engine places them.
    /// /run and /run/sbx must be directories, not symlinks (which would
    /// move the mounts), /run/sandbox and /run/sbx-bg too where the image
    /// has them, and /run/sbx/helper must be exactly sbx's helper (an image
    /// VOLUME placed over /run through a symlink would cover it).
    pub(in crate::sandbox) fn check_remote_layout(&self, id: &str, image: &str, readable: bool) -> Result<()> {
        let args = remote::copy_out(id, "/run");
        let out = run_ok(&*self.docker, &args)?;
        check_run_tar(&out.stdout, readable).map_err(|found| {
            Error::Image(ImageError::Redirected { image: image.to_string(), path: paths::HELPER_DIR.into(), found })
        })
    }
}

/// Most of the sandbox's output sbx quotes in its own messages.
const QUOTED_MAX: usize = 16 * 1024;

/// How long one probe of a relayed socket waits inside the sandbox.
const PROBE_WAIT: Duration = Duration::from_millis(500);

/// The sandbox's own output, made safe to quote on the operator's terminal:
/// control characters other than newline and tab (ESC sequences that
/// rewrite the screen, set the clipboard with OSC 52, or a `\r` that hides
/// a line) are written as escapes, and only the last `QUOTED_MAX` bytes are
/// kept (`--tail` counts lines, and a line can be megabytes).
fn inert(text: &str) -> String {
    let mut start = text.len().saturating_sub(QUOTED_MAX);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let kept = crate::model::text::inert_chars(&text[start..]);
    if start > 0 {
        format!("[...] {kept}")
    } else {
        kept
    }
}

/// The entry `name` of `tar` is exactly sbx's helper.
pub(in crate::sandbox) fn helper_in_tar(tar: &[u8], name: &str, readable: bool) -> std::result::Result<(), String> {
    let mut a = tar::Archive::new(tar);
    for entry in a.entries().map_err(|e| e.to_string())? {
        let mut entry = entry.map_err(|e| e.to_string())?;
        let path = entry.path().map_err(|e| e.to_string())?.to_string_lossy().trim_end_matches('/').to_string();
        if path == name {
            return crate::host::helper::check_entry(&mut entry, readable);
        }
    }
    Err(format!("no {name} in it"))
}

/// The checks of [`Driver::check_remote_layout`] on the tar of /run.
pub(in crate::sandbox) fn check_run_tar(tar: &[u8], readable: bool) -> std::result::Result<(), String> {
    let dirs = ["run", "run/sbx", "run/sandbox", "run/sbx-bg"];
    debug_assert_eq!(format!("/{}", dirs[3]), paths::HELPER_BG_DIR);
    let mut seen_sbx = false;
    let mut a = tar::Archive::new(tar);
    for entry in a.entries().map_err(|e| e.to_string())? {
        let mut entry = entry.map_err(|e| e.to_string())?;
        let path = entry.path().map_err(|e| e.to_string())?.to_string_lossy().trim_end_matches('/').to_string();
        if dirs.contains(&path.as_str()) && entry.header().entry_type() != tar::EntryType::Directory {
            let link = entry.link_name().ok().flatten().map(|l| format!(" to {}", l.display())).unwrap_or_default();
            return Err(format!("/{path} in the image is a {:?}{link}, not a directory", entry.header().entry_type()));
        }
        seen_sbx |= path == "run/sbx";
        if path == "run/sbx/helper" {
            return crate::host::helper::check_entry(&mut entry, readable)
                .map_err(|e| format!("what the sandbox would see at {}: {e}", paths::HELPER_PATH));
        }
    }
    Err(if seen_sbx { "no sbx helper in /run/sbx".into() } else { "no /run/sbx in the created sandbox".into() })
}
