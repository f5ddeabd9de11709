//! Input that sbx refuses before it touches docker: a value and why, with
//! a hint, shared by the spec (flags), the docker runner (its timeout) and
//! the error report.

/// Input that sbx refuses before it touches docker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: {reason}")]
pub struct Invalid {
    pub what: &'static str,
    pub value: String,
    pub reason: String,
    pub hint: Option<String>,
}

impl Invalid {
    pub fn new(what: &'static str, value: impl Into<String>, reason: impl Into<String>) -> Self {
        Invalid { what, value: value.into(), reason: reason.into(), hint: None }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}
