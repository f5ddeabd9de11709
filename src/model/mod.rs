//! What sbx knows about a sandbox, independent of how it learned it: the
//! record and its label keys, the ownership tokens, the ids no sandbox may
//! run as, the names sbx acts on (sandbox, container, pool), the channel kind, the
//! scratch sizes, the fixed paths inside a sandbox and the shape of refused input. A leaf: it
//! imports nothing else of the crate.

pub mod boundary;
pub mod channel;
pub mod engine;
pub mod event;
pub mod forward;
pub mod gate;
pub mod ids;
pub mod invalid;
pub mod names;
pub mod paths;
pub mod record;
pub mod runtime;
pub mod scratch;
pub mod size;
pub mod text;
pub mod token;
