//! `sbx serve`: a second front end beside `commands`, speaking E2B's API
//! so the E2B SDKs drive sbx unchanged. The control plane (`/v2/sandboxes`
//! ...) and the envd API (`/process.Process/*`, `/health`) call the same
//! [`crate::sandbox::Driver`] operations and workbench code the CLI
//! commands call; nothing here shells out to sbx or builds a shell string.
