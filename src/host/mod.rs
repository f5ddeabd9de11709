//! This machine: the state dir, socket dirs, persistent sessions, the helper, interrupts.

pub mod channel;
pub mod helper;
pub mod interrupt;
pub mod persist;
pub mod relay;
pub mod seccomp;
pub mod socket;
pub mod state;
