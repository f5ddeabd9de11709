//! `docker exec`'s exit status as a shell would report it.

/// docker exec answers 126 both for "not executable" and "not found"; the
/// shell convention, which scripts expect, is 127 for "not found".
pub fn exec_status(code: i32, docker_stderr: &str) -> i32 {
    let oci = docker_stderr.contains("OCI runtime exec failed") || docker_stderr.contains("exec failed");
    let not_found =
        docker_stderr.contains("no such file or directory") || docker_stderr.contains("executable file not found");
    if code == 126 && oci && not_found {
        127
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_is_127_and_other_codes_pass_through() {
        let oci = "OCI runtime exec failed: exec failed: unable to start container process: exec: \"/x\": stat /x: no such file or directory: unknown";
        assert_eq!(exec_status(126, oci), 127);
        assert_eq!(
            exec_status(126, "OCI runtime exec failed: exec failed: exec: \"/tmp\": permission denied: unknown"),
            126
        );
        assert_eq!(exec_status(126, "my program said no such file or directory"), 126);
        assert_eq!(exec_status(3, ""), 3);
        assert_eq!(exec_status(0, ""), 0);
    }
}
