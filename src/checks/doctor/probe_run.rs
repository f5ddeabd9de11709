//! Doctor's probe: a real sandbox made from this executable (see
//! `checks::probe`), one exchange over the channel `connect` would use, and
//! the judgement of what the probe saw against what sbx promises.

use std::io::{Read, Write};

use super::judge::{evaluate, route_port, Seen};
use super::{check, Check, Doctor, Status};
use crate::checks::audit::ProcStatus;
use crate::checks::probe::Report;
use crate::docker::{argv, parse};
use crate::error::HostError;
use crate::error::{Error, Result};
use crate::host::socket;
use crate::model::runtime::Registered;
use crate::spec::{ImageRef, Route, SandboxSpec};

impl Doctor<'_> {
    /// The probe image: sbx's own (see `Driver::self_image`).
    fn probe_image(&self) -> Result<String> {
        self.driver.self_image()
    }

    pub(super) fn probe(&self, routes: &[Route], runtime: &Registered, checks: &mut Vec<Check>) {
        let usable = self.usable_routes(routes, checks);
        let image = match self.probe_image().and_then(|i| ImageRef::parse(&i).map_err(Error::from)) {
            Ok(i) => i,
            Err(e) => {
                checks.push(check("probe", Status::Fail, format!("could not make the probe image: {e}"), e.hint()));
                return;
            }
        };
        let targets: Vec<String> =
            usable.iter().filter_map(|r| Some(format!("{}:{}", r.host, route_port(r)?))).collect();
        let spec = self.probe_spec(image, &usable, &targets);
        let started = std::time::Instant::now();
        // Another sbx build on this engine may have dropped sbx's image
        // between the import and the create.
        let created = self.driver.self_image_again(self.driver.create(&spec), spec.image.as_str(), |i| {
            self.driver.create(&SandboxSpec { image: ImageRef::parse(i)?, ..spec.clone() })
        });
        let created = match created {
            Ok(c) => c,
            Err(e) => {
                checks.push(check("probe", Status::Fail, format!("the probe sandbox did not start: {e}"), e.hint()));
                return;
            }
        };
        let took = started.elapsed();
        let remote = self.driver.engine().is_ok_and(|e| e.is_remote());
        let seen = self.seen(&created.record.id, runtime, remote, checks);
        let report = self.exchange(&created.record.id);
        if let Err(e) = self.driver.destroy(std::slice::from_ref(&created.record.id)) {
            checks.push(check(
                "cleanup",
                Status::Fail,
                format!("could not destroy the probe {}: {e}", created.record.id),
                Some(format!("`sbx destroy {}`", created.record.id)),
            ));
        }
        match report {
            Ok(Exchange { nonce, report: r }) => {
                let how = match created.record.channel {
                    crate::host::channel::Kind::Direct => "its socket on the host".to_string(),
                    crate::host::channel::Kind::Exec if remote => {
                        "the relayed channel (docker exec; the engine is remote)".to_string()
                    }
                    crate::host::channel::Kind::Exec if self.runtime == crate::model::runtime::SNAPSHOTS => {
                        "the relayed channel (docker exec; a sandbox that can be checkpointed has no host socket)"
                            .to_string()
                    }
                    crate::host::channel::Kind::Exec => {
                        "the relayed channel (docker exec; sbx is not root)".to_string()
                    }
                };
                let detail = format!(
                    "hardened sandbox {} (runtime {}) ready in {} ms, reached through {how}",
                    created.record.id,
                    runtime.name,
                    took.as_millis()
                );
                checks.push(check("probe", Status::Ok, detail, None));
                evaluate(&r, &nonce, &usable, &targets, &seen, checks);
            }
            Err(e) => {
                checks.push(check("channel", Status::Fail, format!("no exchange over the socket: {e}"), e.hint()))
            }
        }
    }

    /// The routes a probe can take: each route network inspected on its own
    /// first, so one missing network does not hide what the others would
    /// show; what a sandbox on a shared network would reach besides its
    /// target is said (a failure for egress, else a warning).
    fn usable_routes(&self, routes: &[Route], checks: &mut Vec<Check>) -> Vec<Route> {
        let mut usable = Vec::new();
        if !routes.is_empty() {
            let nets: Vec<String> = routes.iter().map(Route::network).collect();
            match self.exec.run(&argv::network_inspect(&nets)) {
                Ok(out) => {
                    let report = parse::networks(&nets, &out.stdout_str(), &out.stderr_str());
                    for r in routes {
                        let n = r.network();
                        let name = format!("route {}", r.kind);
                        match report.nets.get(&n) {
                            Some(info) => {
                                // What a sandbox on this shared network would reach besides the target.
                                let one =
                                    [crate::model::record::RouteNetwork { kind: r.kind.clone(), network: n.clone() }];
                                let nets = std::collections::BTreeMap::from([(n.clone(), info.clone())]);
                                for g in crate::sandbox::boundary::assess("", std::slice::from_ref(r), &one, &nets) {
                                    let status = if g.property == "egress" { Status::Fail } else { Status::Warn };
                                    checks.push(check(
                                        &format!("{name} {}", g.property),
                                        status,
                                        format!("{}; tier 1", g.detail),
                                        Some(g.fix),
                                    ));
                                }
                                usable.push(r.clone());
                            }
                            None => checks.push(check(
                                &name,
                                Status::Fail,
                                format!("network {n} does not exist"),
                                Some(crate::error::missing_network_fix(std::slice::from_ref(&n))),
                            )),
                        }
                    }
                }
                Err(e) => checks.push(check("routes", Status::Fail, e.to_string(), None)),
            }
        }
        usable
    }

    /// The probe sandbox: sbx's own image on the usable routes, 64 MiB, a
    /// 5-minute TTL (gc reaps one a killed doctor left), never pulled, in
    /// the session events and audit tell doctor's probe apart by.
    fn probe_spec(&self, image: ImageRef, usable: &[Route], targets: &[String]) -> SandboxSpec {
        SandboxSpec {
            image,
            session: Some(crate::model::record::PROBE_SESSION.into()),
            routes: usable.to_vec(),
            mounts: vec![],
            state_dir: None,
            memory_mib: Some(64),
            cpus: None,
            pids: crate::spec::DEFAULT_PIDS,
            env: vec![],
            user: None,
            socket_wait: std::time::Duration::from_secs(30),
            strict_egress: false,
            labels: vec![],
            ttl: Some(std::time::Duration::from_secs(300)),
            private_routes: false,
            persist: false,
            persist_size: None,
            clone: None,
            setup: vec![],
            command: targets.to_vec(),
            seccomp_profile: None,
            // A runtime that can checkpoint has no host socket to give.
            channel: match self.runtime == crate::model::runtime::SNAPSHOTS {
                true => crate::host::channel::Choice::Exec,
                false => crate::host::channel::Choice::Auto,
            },
            egress: None,
            runtime: self.runtime.to_string(),
            // sbx's own image, imported here: there is nothing to pull.
            pull: crate::spec::PullPolicy::Never,
            pool: None,
            idle: false,
            remake: None,
            restore: None,
        }
    }

    /// What the host sees of the probe: its SecurityOpt (the engine's
    /// inspect) and its host process (gVisor's Sentry under runsc), read
    /// here or, with a remote engine, by audit's status probe on it.
    fn seen(&self, id: &str, runtime: &Registered, remote: bool, checks: &mut Vec<Check>) -> Seen {
        let raw = self.driver.inspect_one(id).ok();
        let full = raw.as_ref().map(|r| r.full.clone()).unwrap_or_default();
        let security_opt = full["HostConfig"]["SecurityOpt"]
            .as_array()
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let host_process = match (&raw, remote) {
            (_, false) => ProcStatus::of_pid(full["State"]["Pid"].as_i64().unwrap_or(0)),
            (None, true) => None,
            (Some(raw), true) => match crate::checks::audit::process_status(self.driver, id, raw) {
                Ok((status, _)) => status,
                Err(e) => {
                    let detail = format!("the probe's host process could not be read on the remote engine: {e}");
                    checks.push(check("host process", Status::Warn, detail, e.hint()));
                    None
                }
            },
        };
        Seen {
            runtime: runtime.clone(),
            // This machine's kernel is not the engine's: the probe's is judged alone.
            host_kernel: if remote {
                String::new()
            } else {
                std::fs::read_to_string("/proc/version").unwrap_or_default().trim().to_string()
            },
            security_opt,
            host_process,
        }
    }

    /// One exchange with the probe over the channel `connect` would use.
    fn exchange(&self, id: &str) -> Result<Exchange> {
        let channel = self.driver.channel(id)?;
        let crate::host::channel::Conn { mut reader, mut writer, end, stop } =
            channel.open(self.exec, socket::CONNECT_TIMEOUT)?;
        // The exchange takes well under a second; a channel that never ends
        // (a relay whose sandbox stopped under it) must not hang doctor.
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let guard = std::thread::spawn(move || {
            let late = finished.recv_timeout(EXCHANGE_DEADLINE).is_err();
            if late {
                stop();
            }
            late
        });
        let nonce = format!("sbx-doctor-{:016x}", rand::random::<u64>());
        let io = |e| Error::io(format!("talking to the probe in {id}"), e);
        let sent = writer.write_all(nonce.as_bytes()).and_then(|()| writer.flush());
        // The half-close: the probe answers once it has seen EOF.
        drop(writer);
        let mut body = Vec::new();
        let read = sent.and_then(|()| reader.read_to_end(&mut body).map(drop));
        let _ = done.send(());
        if guard.join().unwrap_or(true) {
            let _ = end();
            let waited = humantime::format_duration(EXCHANGE_DEADLINE);
            return Err(io(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer within {waited}"))));
        }
        end()?;
        read.map_err(io)?;
        let report = serde_json::from_slice(&body)
            .map_err(|source| Error::Host(HostError::Json { context: "reading the probe's report".into(), source }))?;
        Ok(Exchange { nonce, report })
    }
}

/// How long doctor waits for the probe's answer once connected.
const EXCHANGE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// What one exchange with the probe gave: the nonce sbx sent, and the report.
struct Exchange {
    nonce: String,
    report: Report,
}
