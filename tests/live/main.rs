//! The live suite: the real `sbx` binary against this machine's Docker
//! engine, one module per area, all in one test binary so the fixture image
//! is built once per run (cargo's `tests/testsuite/main.rs` is the model).
//!
//! These tests need a Docker engine and never skip: without one they fail and
//! say so. `cargo test --lib` runs the unit tests alone; `tests/parsers.rs`
//! (no engine needed) is its own binary. Run one area with
//! `cargo test --test live -- hardening::`.

mod support;

mod attack_files;
mod attack_transfer;
mod boundary;
mod cli_ux;
mod connect_and_ports;
mod create;
mod docs;
mod egress;
mod egress_attack;
mod egress_host;
mod egress_lifecycle;
mod egress_network;
mod engine_faults;
mod events;
mod files_watch;
mod hardening;
mod hostile_image;
mod hostile_lifecycle;
mod invoker_ids;
mod lifecycle;
mod mcp;
mod memory;
mod nonroot;
mod persist;
mod persist_bound;
mod pool;
mod pull;
mod readme_example;
mod remote;
mod remote_attack;
mod remote_audit;
mod remote_clone;
mod remote_egress;
mod remote_gvisor;
mod remote_owners;
mod remote_persist;
mod remote_pool;
mod remote_start;
mod runtime;
mod runtime_attack;
mod runtime_checks;
mod secrets;
mod self_image;
mod serve_attack;
mod serve_clients;
mod serve_e2b;
mod serve_fs;
mod serve_network;
mod serve_process;
mod serve_tls;
mod snapshots;
mod stop_pause;
mod stream_ends;
mod transfer;
mod trust;
mod uids;
mod workbench;
