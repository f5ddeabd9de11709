//! `sbx stats ID...`: resource use, as numbers.

use super::Context;
use crate::error::SandboxError;
use crate::error::{Error, Result};
use crate::model::names::SandboxId;
use crate::workbench::{self, Stats};

pub fn exec(ids: &[SandboxId], watch: bool, ctx: &Context) -> Result<()> {
    let driver = &ctx.driver;
    // A missing sandbox is reported alone, after the others are shown
    // (`stats MISSING LIVE` named both as missing).
    let mut missing = Vec::new();
    let mut targets = Vec::new();
    for id in ids {
        match driver.open(id) {
            Ok(t) => targets.push(t),
            Err(Error::Sandbox(SandboxError::NotFound { .. })) => missing.push(id.to_string()),
            Err(e) => return Err(e),
        }
    }
    if watch {
        (ctx.catch_signals)();
    }
    loop {
        let asked: Vec<String> = targets.iter().map(|t| t.container.to_string()).collect();
        let (s, gone) = workbench::stats_present(driver.docker(), &asked)?;
        if !s.is_empty() || (missing.is_empty() && gone.is_empty()) {
            if ctx.json() {
                ctx.out.json_line(&s)?;
            } else {
                ctx.out.data(&table(&s))?;
            }
        }
        targets.retain(|t| {
            let g = gone.iter().any(|c| c == t.container.as_str());
            if g {
                missing.push(t.sandbox.to_string());
            }
            !g
        });
        if !missing.is_empty() {
            return Err(Error::Sandbox(SandboxError::NotFound { id: missing.join(" ") }));
        }
        if !watch {
            return Ok(());
        }
        for _ in 0..20 {
            if crate::host::interrupt::pending().is_some() {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

fn mib(b: u64) -> String {
    format!("{:.1}MiB", b as f64 / (1024.0 * 1024.0))
}

pub fn table(s: &[Stats]) -> String {
    let mut t = String::from("ID                CPU%    MEM        LIMIT      NET RX     NET TX     PIDS\n");
    for x in s {
        t.push_str(&format!(
            "{:<17} {:<7.2} {:<10} {:<10} {:<10} {:<10} {}\n",
            x.id,
            x.cpu_percent,
            mib(x.memory_bytes),
            mib(x.memory_limit_bytes),
            x.net_rx_bytes,
            x.net_tx_bytes,
            x.pids
        ));
    }
    t
}
