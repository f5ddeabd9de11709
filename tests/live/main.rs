//! The live suite: the real `sbx` binary against this machine's Docker
//! engine, one module per area, all in one test binary so the fixture image
//! is built once per run (cargo's `tests/testsuite/main.rs` is the model).
//!
//! These tests need a Docker engine and never skip: without one they fail and
//! say so. `cargo test --lib` runs the unit tests alone; `tests/parsers.rs`
//! (no engine needed) is its own binary.

mod support;

mod attack2;
mod boundary;
mod examples;
mod hardening;
mod hostile;
mod lifecycle;
mod live;
mod nonroot;
mod persist;
mod transfer;
mod trust;
mod ux;
mod workbench;
