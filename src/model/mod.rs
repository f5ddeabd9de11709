//! What sbx knows about a sandbox, independent of how it learned it.

pub mod record;
