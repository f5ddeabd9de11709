//! What sbx measures and reports: the boundary, audit rules, doctor, the probe.

pub mod audit;
pub mod doctor;
pub mod probe;
