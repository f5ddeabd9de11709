//! What audit is looking at: the runtime a sandbox runs under,
//! the engine's registration of it, and so what the container's host
//! process is. Under runc that process is the workload; under gVisor it is
//! gVisor's Sentry (a user-space kernel, root on the host by gVisor's
//! design), so the rules that read it must read the config instead and say so.

use serde::Serialize;

use super::ProcStatus;
use crate::model::runtime::{Family, Registered};

/// The runtime of one sandbox, as audit learned it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeFacts {
    /// The engine's `HostConfig.Runtime` (sbx's `sbx.runtime` label when absent).
    pub name: String,
    /// What sbx's `sbx.runtime` label records, when it disagrees with the engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_disagrees: Option<String>,
    /// The engine's registration now; None when it lists no such runtime.
    pub registered: Option<Registered>,
    /// The names the engine does list (for the message when it is gone).
    #[serde(skip)]
    pub listed: Vec<String>,
}

impl RuntimeFacts {
    /// runc, as every engine has it (audit does not ask the engine).
    pub fn runc() -> Self {
        let d = crate::model::runtime::DEFAULT;
        RuntimeFacts {
            name: d.into(),
            label_disagrees: None,
            registered: Some(Registered { name: d.into(), path: d.into(), args: vec![] }),
            listed: vec![d.into()],
        }
    }

    pub fn family(&self) -> Option<Family> {
        self.registered.as_ref().map(Registered::family)
    }
}

/// What the container's host process is, for the rules that read it.
pub enum View<'a> {
    /// The workload itself (runc): its status is the sandbox's.
    Workload(&'a ProcStatus),
    /// gVisor's Sentry: the workload runs inside it; its status is gVisor's.
    Sentry(&'a ProcStatus),
    /// Nothing readable that is the workload: the reason.
    Hidden(String),
}

impl<'a> View<'a> {
    /// `unread`: why `p` is None, when it is.
    pub fn of(rt: &RuntimeFacts, p: Option<&'a ProcStatus>, unread: &str) -> Self {
        match (rt.family(), p) {
            // An engine that no longer lists the runtime: the process says what it is.
            (Some(Family::Gvisor) | None, Some(p)) if p.is_sentry() => View::Sentry(p),
            (Some(Family::Kata), _) => {
                View::Hidden("the workload runs in Kata's VM: no host process of the container is the workload".into())
            }
            (_, Some(p)) => View::Workload(p),
            (_, None) => View::Hidden(unread.to_string()),
        }
    }

    /// For a rule that reads the host process: `workload` judges the
    /// workload's status; under gVisor `sentry` says what the Sentry's
    /// status is (and judges it where that is what the rule is about).
    pub fn judge(
        &self,
        workload: impl Fn(&ProcStatus) -> (bool, String),
        sentry: impl Fn(&ProcStatus) -> (bool, String),
    ) -> (bool, String) {
        match self {
            View::Workload(p) => workload(p),
            View::Sentry(p) => sentry(p),
            View::Hidden(why) => (true, format!("established from the config alone: {why}")),
        }
    }
}

/// The `sbx.runtime` rule: which runtime, and whether the workload has a
/// kernel of its own. runc sharing the host's kernel passes: it is the
/// default and sbx's promises hold on it (seccomp, capabilities,
/// namespaces); the detail says what it is. It fails only where audit
/// cannot say what the sandbox runs under, or the engine contradicts itself.
/// Returns (pass, detail, kernel isolation).
pub fn rule(rt: &RuntimeFacts, view: &View) -> (bool, String, bool) {
    let sentry_seen = matches!(view, View::Sentry(_));
    let mut problems = Vec::new();
    if let Some(label) = &rt.label_disagrees {
        problems.push(format!("sbx's record says runtime {label:?}, the engine ran {:?}", rt.name));
    }
    let (ok, what, isolated) = match &rt.registered {
        None => {
            let fix = crate::error::RuntimeError::Missing { name: rt.name.clone(), have: rt.listed.join(", ") };
            problems.push(format!("{fix}; {}", fix.hint().unwrap_or_default()));
            let what = if sentry_seen {
                "its host process is gVisor's Sentry: the workload has a kernel of its own (gVisor)"
            } else {
                "audit cannot say what kernel the workload has"
            };
            (false, what.to_string(), sentry_seen)
        }
        Some(reg) => {
            let at = if reg.path == reg.name { reg.name.clone() } else { format!("{} ({})", reg.name, reg.path) };
            match (reg.family(), view) {
                (Family::Gvisor, View::Sentry(_)) => (
                    true,
                    format!("{at}: the workload has a kernel of its own (gVisor's Sentry, the container's host process)"),
                    true,
                ),
                (Family::Gvisor, View::Workload(p)) => (
                    false,
                    format!(
                        "{at} is registered as gVisor, but the container's host process is {:?}, not gVisor's Sentry: the workload may share the host kernel",
                        p.program
                    ),
                    false,
                ),
                (Family::Gvisor, View::Hidden(why)) => {
                    (true, format!("{at}: the workload has a kernel of its own (gVisor); {why} to confirm"), true)
                }
                (Family::Kata, _) => (true, format!("{at}: the workload has a kernel of its own (Kata's VM)"), true),
                (Family::Runc, _) => (
                    true,
                    format!("{at}: the workload shares the host kernel (runc is the default; `--runtime runsc` gives it gVisor's)"),
                    false,
                ),
                (Family::Other, _) => {
                    (true, format!("{at}: sbx claims nothing about its kernel (counted as the host's)"), false)
                }
            }
        }
    };
    let yes = if isolated { "yes" } else { "no" };
    let mut detail = format!("kernel isolation: {yes}; {what}");
    for p in &problems {
        detail.push_str("; ");
        detail.push_str(p);
    }
    (ok && problems.is_empty(), detail, isolated)
}

/// The `sbx.seccomp` rule's meaning under this runtime, for a config that
/// carries sbx's profile.
///
/// Under gVisor (registered without `--oci-seccomp`, as sbx requires) the
/// profile is passed but not applied inside. The rule still passes when the
/// Sentry runs under its own host filter (Seccomp 2): the rule exists so the
/// host kernel is reached only through a filter sbx vouches for, and under
/// gVisor no workload system call reaches the host kernel at all; only the
/// Sentry's do, through gVisor's filter, which is narrower than sbx's
/// profile. It fails when the Sentry is visible and unfiltered. The detail
/// says the profile is not applied, in `seccomp_meaning`'s words.
pub fn seccomp(rt: &RuntimeFacts, view: &View) -> Option<(bool, String)> {
    let reg = rt.registered.as_ref()?;
    if reg.applies_seccomp() && reg.family() != Family::Gvisor {
        return None;
    }
    if reg.applies_seccomp() {
        return Some((true, format!("the profile sbx ships is applied by runsc ({} --oci-seccomp)", reg.name)));
    }
    let sentry = match view {
        View::Sentry(p) => (p.seccomp == "2", format!("gVisor's Sentry: Seccomp {}", p.seccomp)),
        View::Workload(p) => (false, format!("the host process {:?} is not gVisor's Sentry", p.program)),
        View::Hidden(why) => (true, why.clone()),
    };
    Some((sentry.0, format!("the profile sbx ships is passed, but {}; {}", reg.seccomp_meaning(), sentry.1)))
}
