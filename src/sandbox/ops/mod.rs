//! One file (or folder) per operation, each an `impl Driver` block. An
//! operation names only what `shared` holds and `Driver`'s public API, never
//! an item of another operation (`src/layering.rs` checks it).

pub mod create;
pub mod destroy;
pub mod egress;
pub mod events;
pub mod gc;
pub mod lifecycle;
pub mod pool;
pub mod revoke;
pub mod secrets;
pub mod ttl;
pub mod volumes;
