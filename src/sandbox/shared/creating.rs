//! Creates in flight, as `ls`, `inspect` and gc's plan see them.

use crate::host::state::{Creating, ProcId};

/// What `ls` and `inspect` show for a sandbox whose `sbx create` has not
/// finished: `creating` while its process lives, `abandoned` once it is
/// gone (killed, or the host crashed) until `gc` reaps it (
/// a SIGKILLed create showed as `running`).
pub fn mark_creates(
    records: &mut [crate::model::record::Record],
    creating: &[Creating],
    alive: &dyn Fn(&ProcId) -> bool,
) {
    for r in records {
        if let Some(c) = creating.iter().find(|c| c.id == r.id) {
            let live = c.by.as_ref().is_some_and(alive);
            r.state = if live { "creating" } else { "abandoned" }.to_string();
        }
    }
}
