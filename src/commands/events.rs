//! `sbx events [ID...]`: lifecycle events of this host's sandboxes, one
//! line each, until Ctrl-C (exit 0), `--until` or `--until-event`.

use std::time::SystemTime;

use super::Context;
use crate::cli::EventsArgs;
use crate::error::{Invalid, Result};
use crate::model::event::Event;
use crate::model::text::inert_chars;
use crate::sandbox::events::Flow;
use crate::spec::{parse_event_kind, parse_id, parse_time, EventQuery};

pub fn query(a: &EventsArgs, now: SystemTime) -> Result<EventQuery> {
    let since = a.since.as_deref().map(|s| parse_time("--since", s, now)).transpose()?;
    let until = a.until.as_deref().map(|s| parse_time("--until", s, now)).transpose()?;
    if let (Some(s), Some(u)) = (since, until) {
        if u < s {
            let v = a.until.clone().unwrap_or_default();
            return Err(Invalid::new("--until", v, "it is before --since").into());
        }
    }
    Ok(EventQuery {
        since,
        until,
        ids: a.ids.iter().map(|i| parse_id(i)).collect::<Result<_, _>>()?,
        until_event: a.until_event.iter().map(|k| parse_event_kind(k)).collect::<Result<_, _>>()?,
    })
}

pub fn exec(a: &EventsArgs, ctx: &Context) -> Result<u8> {
    let q = query(a, SystemTime::now())?;
    // Ctrl-C only sets a flag from here on: the loop sees it within a tick
    // and kills `docker events` (its own process group) before sbx exits.
    (ctx.catch_signals)();
    let stop = || crate::host::interrupt::pending().is_some() || crate::host::interrupt::stdout_gone();
    ctx.driver.events(&q, &stop, &mut |e| {
        if ctx.json() {
            ctx.out.json_line(e)?;
        } else {
            ctx.out.data(&line(e))?;
        }
        Ok(if q.until_event.contains(&e.event) { Flow::Done } else { Flow::More })
    })?;
    Ok(0)
}

/// `TIME  ID  EVENT  DETAIL`, fixed widths so each line prints as it comes.
pub fn line(e: &Event) -> String {
    let detail = inert_chars(&e.detail()).replace(['\n', '\t'], " ");
    format!("{}  {}  {:<9}  {}\n", e.time, inert_chars(&e.id), e.event.name(), detail)
}
