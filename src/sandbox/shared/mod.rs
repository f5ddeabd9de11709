//! What more than one operation uses: the parts of a sandbox (its gate,
//! forwarders, route networks, channel, boundary, the boot it waits out),
//! the fillers that fill volumes, and the state of sessions and uids, local
//! and remote. Nothing here names an item of an operation.

pub mod boot;
pub mod boundary;
pub mod channel;
pub mod fillers;
pub mod forwarders;
pub mod networks;
pub mod remote_clone;
pub mod remote_state;
pub mod uids;
