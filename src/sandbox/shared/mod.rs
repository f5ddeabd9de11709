//! What more than one operation uses: the parts of a sandbox (its boot,
//! boundary, channel, egress gate, forwarders, route networks), removing
//! containers, the fillers that fill volumes, creates in flight, pool
//! members, and the state of sessions and uids, local and remote. Nothing
//! here names an item of an operation (`src/layering.rs` checks it).

pub mod boot;
pub mod boundary;
pub mod channel;
pub mod creating;
pub mod fillers;
pub mod forwarders;
pub mod gates;
pub mod members;
pub mod networks;
pub mod remote_clone;
pub mod remote_state;
pub mod removal;
pub mod restore;
pub mod sessions;
pub mod uids;
