//! What sbx measures for the operator, on top of the lifecycle: `audit`
//! (CIS Docker Benchmark rules and sbx's own, read from the engine's view of
//! a sandbox), `doctor` (is this host fit: engine, runtime, directories, a
//! probe sandbox end to end) and `probe` (the static program doctor's probe
//! image runs). A new check of a sandbox or of the host goes here; what a
//! route reaches is judged during create (`sandbox::shared::boundary`).

pub mod audit;
pub mod doctor;
pub mod probe;
