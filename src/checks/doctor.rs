//! `sbx doctor`: proves on this host, end to end, that sbx can do its job
//! and that the boundary is what sbx claims, and says how to fix what fails.

use std::io::{Read, Write};
use std::path::Path;

use serde::Serialize;

use crate::checks::probe::Report;
use crate::docker::{parse, DockerExec};
use crate::error::{Error, Result};
use crate::host::socket;
use crate::sandbox::Driver;
use crate::spec::{ImageRef, Route, SandboxSpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
    Skip,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    pub fix: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    /// True when nothing that was checked failed (warnings allowed).
    pub ok: bool,
    pub checks: Vec<Check>,
}

fn check(name: &str, status: Status, detail: impl Into<String>, fix: Option<String>) -> Check {
    Check { name: name.to_string(), status, detail: detail.into(), fix }
}

/// `major.minor.patch` from a version such as `1.1.5+ds1` or `20.10.24+dfsg1`.
pub fn version_triple(v: &str) -> Option<(u64, u64, u64)> {
    let core = v.trim().trim_start_matches('v');
    let mut parts = core.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty()).map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next().flatten().unwrap_or(0), parts.next().flatten().unwrap_or(0)))
}

/// runc before 1.2.8 lets a container escape or write host files
/// (CVE-2024-21626 "Leaky Vessels"; CVE-2025-31133, -52565, -52881).
pub fn runc_check(version: Option<&str>) -> Check {
    let fix = Some(
        "upgrade runc to 1.2.8 or later (your distribution's runc or containerd.io package), then restart dockerd"
            .to_string(),
    );
    match version.and_then(|v| version_triple(v).map(|t| (v, t))) {
        Some((v, t)) if t >= (1, 2, 8) => check("runc", Status::Ok, format!("runc {v}"), None),
        Some((v, _)) => check(
            "runc",
            Status::Warn,
            format!("runc {v} is older than 1.2.8: container escapes CVE-2024-21626, CVE-2025-31133, CVE-2025-52565, CVE-2025-52881 are not fixed"),
            fix,
        ),
        None => check("runc", Status::Warn, "the engine does not report a runc version; cannot rule out CVE-2024-21626 and later runc escapes", fix),
    }
}

/// Docker's embedded DNS forwards lookups from internal networks upstream
/// before 26.0.0 / 25.0.4 / 23.0.11 (CVE-2024-29018): a data channel out.
pub fn engine_dns_check(version: &str) -> Check {
    match version_triple(version) {
        Some(t) if t < (23, 0, 11) || ((24, 0, 0)..(25, 0, 4)).contains(&t) => check(
            "engine-dns",
            Status::Warn,
            format!("engine {version} forwards DNS from internal networks to external resolvers (CVE-2024-29018): names can carry data out of a tier-2 sandbox"),
            Some("upgrade Docker Engine to 26.0.0, 25.0.4 or 23.0.11 or later".into()),
        ),
        Some(_) => check("engine-dns", Status::Ok, format!("engine {version} is not affected by CVE-2024-29018"), None),
        None => check("engine-dns", Status::Warn, format!("cannot parse engine version {version:?}"), None),
    }
}

pub struct Doctor<'a> {
    pub driver: &'a Driver,
    pub exec: &'a dyn DockerExec,
    /// The sbx executable to pack into the probe image.
    pub exe: &'a Path,
}

impl Doctor<'_> {
    pub fn run(&self, routes: &[Route]) -> DoctorReport {
        let mut checks = Vec::new();
        let docker_ok = self.docker(&mut checks);
        self.host_dirs(&mut checks);
        if docker_ok {
            self.probe(routes, &mut checks);
        } else {
            checks.push(check("probe", Status::Skip, "needs a Docker engine that answers", None));
        }
        let ok = !checks.iter().any(|c| c.status == Status::Fail);
        DoctorReport { ok, checks }
    }

    fn docker(&self, checks: &mut Vec<Check>) -> bool {
        let args = crate::docker::argv::version();
        let out = match self.exec.run(&args) {
            Ok(o) => o,
            Err(e) => {
                checks.push(check(
                    "docker",
                    Status::Fail,
                    format!("{e}"),
                    Some("install the docker CLI (or set SBX_DOCKER to its path)".into()),
                ));
                return false;
            }
        };
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let server = v["Server"]["Version"].as_str().unwrap_or_default().to_string();
        if out.status != 0 || server.is_empty() {
            let why = out.stderr_str();
            checks.push(check(
                "docker",
                Status::Fail,
                format!("the docker daemon does not answer: {}", if why.is_empty() { "no server version" } else { &why }),
                Some("start dockerd (e.g. `systemctl start docker`), or point DOCKER_HOST at a running engine; `docker version` must show a Server".into()),
            ));
            return false;
        }
        let api = v["Server"]["ApiVersion"].as_str().unwrap_or("?");
        let client = v["Client"]["Version"].as_str().unwrap_or("?");
        checks.push(check("docker", Status::Ok, format!("engine {server} (API {api}), CLI {client}"), None));
        let runc = v["Server"]["Components"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["Name"] == "runc"))
            .and_then(|c| c["Version"].as_str());
        checks.push(runc_check(runc));
        checks.push(engine_dns_check(&server));
        // A hung engine (20.10's network-controller deadlock) still answers
        // `version`, which the daemon serves without taking its locks, but
        // not `info` or `ps`: that is the state to report here.
        let info = self.exec.run(&crate::docker::argv::info_os());
        let ps = self.exec.run(&crate::docker::argv::ps_quiet());
        if let Some(e) = [&info, &ps].into_iter().find_map(|r| r.as_ref().err()) {
            checks.push(check(
                "engine",
                Status::Fail,
                format!("the engine answers `docker version` but is hung: {e}"),
                Some("restart dockerd (`systemctl restart docker`); engine 20.10 can deadlock when many containers are removed at once".into()),
            ));
            return false;
        }
        let os = info
            .ok()
            .filter(|o| o.status == 0)
            .map(|o| o.stdout_str().trim().trim_matches('"').to_string())
            .unwrap_or_default();
        if os.contains("Docker Desktop") {
            checks.push(check(
                "platform",
                Status::Fail,
                format!("{os} runs containers in a VM, and Docker Desktop (on macOS in particular) cannot carry unix sockets from the VM to the host: `sbx connect` cannot reach a sandbox"),
                Some("run sbx on a Linux host with Docker Engine (a Linux VM of your own works)".into()),
            ));
        } else {
            checks.push(check(
                "platform",
                Status::Ok,
                format!("{os}: sockets bound in a sandbox are reachable from the host"),
                None,
            ));
        }
        true
    }

    fn host_dirs(&self, checks: &mut Vec<Check>) {
        match self.driver.socket_root() {
            Ok(root) => {
                let example = socket::socket_path(&root, "sbx-000000000000");
                let len = example.as_os_str().len();
                if len > socket::MAX_SOCKET_PATH {
                    checks.push(check(
                        "sockets",
                        Status::Fail,
                        format!("{}: socket paths would be {len} bytes, over the 107 Linux allows", root.display()),
                        Some("use a shorter --socket-dir (or SBX_SOCKET_DIR)".into()),
                    ));
                } else if !nix::unistd::geteuid().is_root() {
                    // Issue 10 item 7: the sandbox user's socket is not writable by a non-root caller.
                    checks.push(check(
                        "sockets",
                        Status::Ok,
                        format!("{} is writable; not root, so sandboxes are reached through the relayed channel (docker exec), their /run/sandbox a 1 MiB tmpfs inside", root.display()),
                        None,
                    ));
                } else {
                    checks.push(check(
                        "sockets",
                        Status::Ok,
                        format!("{} is writable; socket paths are {len} of 107 bytes", root.display()),
                        None,
                    ));
                }
            }
            Err(e) => checks.push(check("sockets", Status::Fail, e.to_string(), e.hint())),
        }
        match self.driver.state() {
            Ok(crate::sandbox::HostState { state: st, .. }) => {
                checks.push(check("state", Status::Ok, format!("{} (ownership key, TTLs)", st.dir.display()), None))
            }
            Err(e) => checks.push(check(
                "state",
                Status::Fail,
                e.to_string(),
                Some("pass --data-dir DIR (or SBX_DATA_DIR)".into()),
            )),
        }
    }

    /// The probe image, made from this executable and cached by content.
    fn probe_image(&self) -> Result<String> {
        let (tar, hash) = crate::checks::probe::image_tar(self.exe)
            .map_err(|e| Error::io(format!("packing {} into the probe image", self.exe.display()), e))?;
        let label = format!("sbx-probe.hash={hash}");
        let out = crate::docker::run_ok(self.exec, &crate::docker::argv::images_labelled(&label))?;
        if let Some(id) = out.stdout_str().lines().next().filter(|l| l.starts_with("sha256:")) {
            return Ok(id.to_string());
        }
        let args = crate::docker::argv::import(&label);
        let out = self.exec.run_input(&args, &tar)?;
        if out.status != 0 {
            return Err(crate::docker::status_error(&args, &out).into());
        }
        let id = out.stdout_str().trim().to_string();
        // Probe images of other sbx builds are dead weight: drop them (an
        // image still in use is refused by docker and stays).
        if let Ok(all) = crate::docker::run_ok(self.exec, &crate::docker::argv::images_labelled("sbx-probe.hash")) {
            let stale: Vec<String> = all.stdout_str().lines().filter(|l| *l != id).map(str::to_string).collect();
            if !stale.is_empty() {
                let mut args = vec![std::ffi::OsString::from("rmi"), "--".into()];
                args.extend(stale.iter().map(std::ffi::OsString::from));
                let _ = self.exec.run(&args);
            }
        }
        Ok(id)
    }

    fn probe(&self, routes: &[Route], checks: &mut Vec<Check>) {
        // Each route network on its own first, so one missing network does
        // not hide what the others would show.
        let mut usable = Vec::new();
        if !routes.is_empty() {
            let nets: Vec<String> = routes.iter().map(Route::network).collect();
            match self.exec.run(&crate::docker::argv::network_inspect(&nets)) {
                Ok(out) => {
                    let report = parse::networks(&nets, &out.stdout_str(), &out.stderr_str());
                    for r in routes {
                        let n = r.network();
                        let name = format!("route {}", r.kind);
                        match report.nets.get(&n) {
                            Some(info) => {
                                // What a sandbox on this shared network would reach besides the target.
                                let one = [(r.kind.clone(), n.clone())];
                                let nets = std::collections::BTreeMap::from([(n.clone(), info.clone())]);
                                for g in crate::checks::boundary::assess("", std::slice::from_ref(r), &one, &nets) {
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
        let image = match self.probe_image().and_then(|i| ImageRef::parse(&i).map_err(Error::from)) {
            Ok(i) => i,
            Err(e) => {
                checks.push(check("probe", Status::Fail, format!("could not make the probe image: {e}"), e.hint()));
                return;
            }
        };
        let targets: Vec<String> =
            usable.iter().filter_map(|r| Some(format!("{}:{}", r.host, route_port(r)?))).collect();
        let spec = SandboxSpec {
            image,
            session: Some("sbx-doctor".into()),
            routes: usable.clone(),
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
            clone: None,
            setup: vec![],
            command: targets.clone(),
            seccomp_profile: None,
            channel: crate::host::channel::Choice::Auto,
        };
        let started = std::time::Instant::now();
        let created = match self.driver.create(&spec) {
            Ok(c) => c,
            Err(e) => {
                checks.push(check("probe", Status::Fail, format!("the probe sandbox did not start: {e}"), e.hint()));
                return;
            }
        };
        let took = started.elapsed();
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
            Ok((nonce, r)) => {
                let how = match created.record.channel {
                    crate::host::channel::Kind::Direct => "its socket on the host".to_string(),
                    crate::host::channel::Kind::Exec => {
                        "the relayed channel (docker exec; sbx is not root)".to_string()
                    }
                };
                let detail = format!(
                    "hardened sandbox {} ready in {} ms, reached through {how}",
                    created.record.id,
                    took.as_millis()
                );
                checks.push(check("probe", Status::Ok, detail, None));
                evaluate(&r, &nonce, &usable, &targets, checks);
            }
            Err(e) => {
                checks.push(check("channel", Status::Fail, format!("no exchange over the socket: {e}"), e.hint()))
            }
        }
    }
}

fn route_port(r: &Route) -> Option<u16> {
    r.port.or_else(|| match r.target.split_once("://").map(|(s, _)| s) {
        Some("http") | Some("ws") => Some(80),
        Some("https") | Some("wss") => Some(443),
        _ => None,
    })
}

impl Doctor<'_> {
    /// One exchange with the probe over the channel `connect` would use.
    fn exchange(&self, id: &str) -> Result<(String, Report)> {
        let channel = self.driver.channel(id)?;
        let crate::host::channel::Conn { mut reader, mut writer, end } =
            channel.open(self.exec, socket::CONNECT_TIMEOUT)?;
        let nonce = format!("sbx-doctor-{:016x}", rand::random::<u64>());
        let io = |e| Error::io(format!("talking to the probe in {id}"), e);
        writer.write_all(nonce.as_bytes()).and_then(|()| writer.flush()).map_err(io)?;
        // The half-close: the probe answers once it has seen EOF.
        drop(writer);
        let mut body = Vec::new();
        let read = reader.read_to_end(&mut body);
        end()?;
        read.map_err(io)?;
        let report = serde_json::from_slice(&body).map_err(|e| Error::io("reading the probe's report", e.into()))?;
        Ok((nonce, report))
    }
}

/// Judge what the probe saw against what sbx promises.
pub fn evaluate(r: &Report, nonce: &str, routes: &[Route], targets: &[String], checks: &mut Vec<Check>) {
    let zero = "0000000000000000";
    let mut add = |name: &str, ok: bool, good: String, bad: String, fix: &str| {
        let (status, detail, fix) =
            if ok { (Status::Ok, good, None) } else { (Status::Fail, bad, Some(fix.to_string())) };
        checks.push(check(name, status, detail, fix));
    };
    add(
        "channel",
        r.echo == nonce,
        "bytes went both ways over the socket".into(),
        format!("sent {nonce:?}, got back {:?}", r.echo),
        "check that nothing else binds the socket directory",
    );
    let caps = [&r.cap_eff, &r.cap_prm, &r.cap_bnd, &r.cap_amb];
    add(
        "capabilities",
        caps.iter().all(|c| c.as_str() == zero),
        "none (effective, permitted, bounding, ambient all 0)".into(),
        format!("CapEff {} CapPrm {} CapBnd {} CapAmb {}", r.cap_eff, r.cap_prm, r.cap_bnd, r.cap_amb),
        "the engine ignored --cap-drop ALL; check for a daemon-wide default or an authorization plugin",
    );
    add(
        "no-new-privileges",
        r.no_new_privs == "1",
        "NoNewPrivs=1".into(),
        format!("NoNewPrivs={}", r.no_new_privs),
        "the engine ignored --security-opt no-new-privileges",
    );
    add(
        "seccomp",
        r.seccomp == "2",
        "a seccomp filter is on".into(),
        format!("Seccomp={} (2 means filtered)", r.seccomp),
        "start dockerd with its default seccomp profile (not seccomp=unconfined)",
    );
    add(
        "read-only root",
        r.read_only_root,
        "the root filesystem refuses writes".into(),
        "the root filesystem is writable".into(),
        "the engine ignored --read-only",
    );
    add(
        "user",
        !r.uid.is_empty() && r.uid != "0",
        format!("uid {} gid {}", r.uid, r.gid),
        format!("running as uid {}", r.uid),
        "check for a userns or daemon user override",
    );
    add(
        "scratch",
        r.tmp_writable && r.state_writable,
        "/tmp and /state are writable".into(),
        format!("/tmp writable: {}, /state writable: {}", r.tmp_writable, r.state_writable),
        "the tmpfs mounts did not take the sandbox user's ownership",
    );
    let mut ifaces = r.interfaces.clone();
    ifaces.sort();
    let nets: std::collections::BTreeSet<String> = routes.iter().map(Route::network).collect();
    let expect = 1 + nets.len();
    add(
        "network",
        ifaces.len() == expect && ifaces.contains(&"lo".to_string()),
        format!("interfaces: {}", ifaces.join(", ")),
        format!("expected lo and {} route interface(s), saw {}", nets.len(), ifaces.join(", ")),
        "check the engine's network configuration",
    );
    for (route, target) in routes.iter().filter(|r| route_port(r).is_some()).zip(targets) {
        let seen = r.routes.iter().find(|c| &c.target == target);
        let name = format!("route {}", route.kind);
        match seen {
            Some(c) if c.reached => checks.push(check(&name, Status::Ok, format!("{target} reachable over {} ({})", route.network(), c.detail), None)),
            Some(c) => checks.push(check(&name, Status::Fail, format!("{target} not reachable over {}: {}", route.network(), c.detail),
                Some(format!("attach the service to the network (`docker network connect {} {}`) and check it listens on the port", route.network(), route.host)))),
            None => checks.push(check(&name, Status::Fail, format!("the probe did not try {target}"), None)),
        }
    }
    for route in routes.iter().filter(|r| route_port(r).is_none()) {
        checks.push(check(
            &format!("route {}", route.kind),
            Status::Skip,
            format!("{} names no port to try", route.target),
            None,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(version_triple("1.1.5+ds1"), Some((1, 1, 5)));
        assert_eq!(version_triple("20.10.24+dfsg1"), Some((20, 10, 24)));
        assert_eq!(version_triple("v1.2.8"), Some((1, 2, 8)));
        assert_eq!(version_triple("26.1"), Some((26, 1, 0)));
        assert_eq!(version_triple("dev"), None);
        assert_eq!(runc_check(Some("1.1.5+ds1")).status, Status::Warn);
        assert!(runc_check(Some("1.1.5")).detail.contains("CVE-2024-21626"));
        assert_eq!(runc_check(Some("1.2.8")).status, Status::Ok);
        assert_eq!(runc_check(Some("1.3.0")).status, Status::Ok);
        assert_eq!(runc_check(None).status, Status::Warn);
        for (v, vulnerable) in [
            ("20.10.24", true),
            ("23.0.11", false),
            ("24.0.9", true),
            ("25.0.3", true),
            ("25.0.4", false),
            ("26.0.0", false),
        ] {
            assert_eq!(engine_dns_check(v).status == Status::Warn, vulnerable, "{v}");
        }
    }

    fn good() -> Report {
        let z = "0000000000000000".to_string();
        Report {
            echo: "n".into(),
            uid: "65534".into(),
            gid: "65534".into(),
            cap_eff: z.clone(),
            cap_prm: z.clone(),
            cap_bnd: z.clone(),
            cap_amb: z,
            no_new_privs: "1".into(),
            seccomp: "2".into(),
            read_only_root: true,
            tmp_writable: true,
            state_writable: true,
            interfaces: vec!["lo".into()],
            routes: vec![],
        }
    }

    #[test]
    fn a_hardened_probe_passes_and_each_weakness_fails() {
        let mut checks = Vec::new();
        evaluate(&good(), "n", &[], &[], &mut checks);
        assert!(checks.iter().all(|c| c.status == Status::Ok), "{checks:?}");
        let weak = [
            Report { cap_eff: "00000000a80425fb".into(), ..good() },
            Report { no_new_privs: "0".into(), ..good() },
            Report { seccomp: "0".into(), ..good() },
            Report { read_only_root: false, ..good() },
            Report { uid: "0".into(), ..good() },
            Report { tmp_writable: false, ..good() },
            Report { interfaces: vec!["lo".into(), "eth0".into()], ..good() },
            Report { echo: "other".into(), ..good() },
        ];
        for r in weak {
            let mut checks = Vec::new();
            evaluate(&r, "n", &[], &[], &mut checks);
            assert_eq!(checks.iter().filter(|c| c.status == Status::Fail).count(), 1, "{r:?}");
        }
    }

    /// Issue 10, consistency: doctor's fix for a missing route network is create's.
    #[test]
    fn a_missing_network_is_fixed_as_create_says() {
        let fix = crate::error::missing_network_fix(&["sbx-proxy".to_string()]);
        assert!(fix.contains("docker network connect --alias proxy sbx-proxy SERVICE"), "{fix}");
        assert!(fix.contains("com.docker.network.bridge.inhibit_ipv4=true"), "{fix}");
        let e = crate::error::Error::NetworkMissing { networks: vec!["sbx-proxy".into()] };
        assert!(e.hint().unwrap().starts_with(&fix));
    }

    #[test]
    fn routes_are_judged_by_what_the_probe_reached() {
        let route = Route::parse("inference:proxy:8080").unwrap();
        let mut r = good();
        r.interfaces = vec!["lo".into(), "eth0".into()];
        r.routes = vec![crate::checks::probe::RouteCheck {
            target: "proxy:8080".into(),
            reached: false,
            detail: "refused".into(),
        }];
        let mut checks = Vec::new();
        evaluate(&r, "n", std::slice::from_ref(&route), &["proxy:8080".into()], &mut checks);
        let c = checks.iter().find(|c| c.name == "route inference").unwrap();
        assert_eq!(c.status, Status::Fail);
        assert!(c.fix.as_deref().unwrap().contains("docker network connect sbx-proxy proxy"));
        assert_eq!(route_port(&Route::parse("docs:https://docs").unwrap()), Some(443));
        assert_eq!(route_port(&Route::parse("docs:docs").unwrap()), None);
    }
}
