//! CheckError: its failures, each with its `--json` kind and its hint.
//! Every one exits 1 (see the table in the parent module).

/// The verdicts of `sbx audit` and `sbx doctor`.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("audit of {id}: failed rules: {}", failed.join(", "))]
    AuditFailed { id: String, failed: Vec<String> },
    #[error("doctor: failed checks: {}", failed.join(", "))]
    DoctorFailed { failed: Vec<String> },
    /// Audit's status probe (remote engines) gave no answer sbx can trust.
    #[error("audit of {id}: the status probe gave no usable answer: {reason}")]
    AuditProbe { id: String, reason: String },
}

impl CheckError {
    pub fn kind(&self) -> &'static str {
        match self {
            CheckError::AuditFailed { .. } => "audit_failed",
            CheckError::DoctorFailed { .. } => "doctor_failed",
            CheckError::AuditProbe { .. } => "audit_probe",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            CheckError::AuditFailed { id, .. } => format!("`sbx destroy {id}`; a sandbox made by `sbx create` passes every rule, so look for a changed engine default"),
            CheckError::DoctorFailed { .. } => "each failed check above says how to fix it".into(),
            CheckError::AuditProbe { id, .. } => format!("run `sbx audit {id}` again; if it fails the same way, `sbx doctor` checks the engine"),
        })
    }
}
