//! `sbx stats ID...`: resource use, as numbers.

use crate::error::Result;
use crate::spec::parse_id;
use crate::workbench::{self, Stats};
use crate::{Dirs, Env};

pub fn exec(ids: &[String], watch: bool, json: bool, env: &Env, dirs: &Dirs) -> Result<()> {
    let ids: Vec<String> = ids.iter().map(|i| parse_id(i)).collect::<Result<_, _>>()?;
    let driver = crate::real_driver(env, dirs);
    let targets: Vec<String> = ids.iter().map(|id| super::owned(&driver, id)).collect::<Result<_>>()?;
    let named = |mut e| {
        for (t, id) in targets.iter().zip(&ids) {
            e = super::named(e, t, id);
        }
        e
    };
    if watch {
        crate::interrupt::install();
    }
    loop {
        let s = workbench::stats(driver.docker(), &targets).map_err(named)?;
        if json {
            super::json_line(&s)?;
        } else {
            super::out(&table(&s))?;
        }
        if !watch {
            return Ok(());
        }
        for _ in 0..20 {
            if crate::interrupt::pending().is_some() {
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
