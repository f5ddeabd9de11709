use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(sbx::run(std::env::args_os().collect(), sbx::Env::from_process()))
}
