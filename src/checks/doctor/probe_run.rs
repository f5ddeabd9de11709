//! Doctor's probe: a real sandbox made from this executable (see
//! `checks::probe`), one exchange over the channel `connect` would use, and
//! the judgement of what the probe saw against what sbx promises.

use std::io::{Read, Write};

use super::{check, Check, Doctor, Status};
use crate::checks::probe::Report;
use crate::docker::{argv, parse};
use crate::error::HostError;
use crate::error::{Error, Result};
use crate::host::socket;
use crate::spec::{ImageRef, Route, SandboxSpec};

impl Doctor<'_> {
    /// The probe image, made from this executable and cached by content.
    fn probe_image(&self) -> Result<String> {
        crate::host::self_image::ensure(self.exec, self.exe)
    }

    pub(super) fn probe(&self, routes: &[Route], checks: &mut Vec<Check>) {
        // Each route network on its own first, so one missing network does
        // not hide what the others would show.
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
            egress: None,
            runtime: self.runtime.to_string(),
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
            Ok(Exchange { nonce, report: r }) => {
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

    /// One exchange with the probe over the channel `connect` would use.
    fn exchange(&self, id: &str) -> Result<Exchange> {
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
        let report = serde_json::from_slice(&body)
            .map_err(|source| Error::Host(HostError::Json { context: "reading the probe's report".into(), source }))?;
        Ok(Exchange { nonce, report })
    }
}

/// What one exchange with the probe gave: the nonce sbx sent, and the report.
struct Exchange {
    nonce: String,
    report: Report,
}

fn route_port(r: &Route) -> Option<u16> {
    r.port.or_else(|| match r.target.split_once("://").map(|(s, _)| s) {
        Some("http") | Some("ws") => Some(80),
        Some("https") | Some("wss") => Some(443),
        _ => None,
    })
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
        let e =
            crate::error::Error::Route(crate::error::RouteError::NetworkMissing { networks: vec!["sbx-proxy".into()] });
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
