//! A scripted stand-in for the docker CLI, for tests.
//!
//! Answers are replayed in order; every argv is recorded so a test can
//! compare the exact calls. An unscripted call panics, so a test cannot
//! pass while sbx makes calls nobody expected.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::sync::{Arc, Mutex};

use super::{Background, DockerExec, Output};
use crate::error::DockerError;

type Hook = Box<dyn FnOnce(&[String]) + Send>;

enum Answer {
    Output(Output, Option<Hook>),
    SpawnFails,
    TimesOut(std::time::Duration),
}

#[derive(Default)]
struct State {
    answers: VecDeque<Answer>,
    calls: Vec<Vec<String>>,
    inputs: Vec<(usize, Vec<u8>)>,
}

#[derive(Clone, Default)]
pub struct FakeDocker {
    state: Arc<Mutex<State>>,
}

impl FakeDocker {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&self, out: Output) -> &Self {
        self.state.lock().unwrap().answers.push_back(Answer::Output(out, None));
        self
    }

    /// Answer with `out`, after running `hook` on the argv (e.g. to bind the
    /// socket a real sandbox would bind).
    pub fn push_with(&self, out: Output, hook: impl FnOnce(&[String]) + Send + 'static) -> &Self {
        self.state.lock().unwrap().answers.push_back(Answer::Output(out, Some(Box::new(hook))));
        self
    }

    /// The next call fails to spawn, as when docker is not installed.
    pub fn push_spawn_failure(&self) -> &Self {
        self.state.lock().unwrap().answers.push_back(Answer::SpawnFails);
        self
    }

    /// The next call is cut off at its deadline, as on a hung engine.
    pub fn push_timeout(&self, after: std::time::Duration) -> &Self {
        self.state.lock().unwrap().answers.push_back(Answer::TimesOut(after));
        self
    }

    /// Every argv run or spawned so far, in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        self.state.lock().unwrap().calls.clone()
    }

    /// Just the docker subcommands, e.g. `["image inspect", "run"]`.
    pub fn verbs(&self) -> Vec<String> {
        self.calls().iter().map(|c| verb(c)).collect()
    }

    /// Stdin given to calls, as (index into `calls`, bytes).
    pub fn inputs(&self) -> Vec<(usize, Vec<u8>)> {
        self.state.lock().unwrap().inputs.clone()
    }

    pub fn remaining(&self) -> usize {
        self.state.lock().unwrap().answers.len()
    }
}

fn verb(argv: &[String]) -> String {
    match argv.first().map(String::as_str) {
        Some(first @ ("image" | "network" | "container")) => {
            format!("{first} {}", argv.get(1).map(String::as_str).unwrap_or(""))
        }
        Some(first) => first.to_string(),
        None => String::new(),
    }
}

fn strings(args: &[OsString]) -> Vec<String> {
    args.iter().map(|a| a.to_string_lossy().into_owned()).collect()
}

impl DockerExec for FakeDocker {
    fn run(&self, args: &[OsString]) -> Result<Output, DockerError> {
        let argv = strings(args);
        let answer = {
            let mut st = self.state.lock().unwrap();
            st.calls.push(argv.clone());
            st.answers.pop_front()
        };
        match answer {
            Some(Answer::Output(out, hook)) => {
                if let Some(h) = hook {
                    h(&argv);
                }
                Ok(out)
            }
            Some(Answer::SpawnFails) => Err(DockerError::Spawn {
                program: "docker".into(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"),
            }),
            Some(Answer::TimesOut(after)) => Err(DockerError::Timeout { command: super::verb(args), after }),
            None => panic!("unscripted docker call: {argv:?}"),
        }
    }

    fn run_input(&self, args: &[OsString], input: &[u8]) -> Result<Output, DockerError> {
        {
            let mut st = self.state.lock().unwrap();
            let at = st.calls.len();
            st.inputs.push((at, input.to_vec()));
        }
        self.run(args)
    }

    fn run_attached(&self, args: &[OsString], _attach: super::Attach) -> Result<(i32, String), DockerError> {
        let out = self.run(args)?;
        Ok((out.status, out.stderr_str()))
    }

    /// Streams the scripted stdout to `output`; what `input` writes is
    /// recorded like `run_input`'s.
    fn run_stream(
        &self,
        args: &[OsString],
        input: Option<&mut super::StreamIn<'_>>,
        output: &mut super::StreamOut<'_>,
    ) -> Result<super::Streamed, DockerError> {
        let mut written = Vec::new();
        let input_r = input.map(|f| f(&mut written)).unwrap_or(Ok(()));
        {
            let mut st = self.state.lock().unwrap();
            let at = st.calls.len();
            st.inputs.push((at, written));
        }
        let out = self.run(args)?;
        let output_r = output(&mut out.stdout.as_slice());
        Ok(super::Streamed { status: out.status, stderr: out.stderr, input: input_r, output: output_r })
    }

    /// The scripted stdout is what the process prints; what sbx writes to
    /// its stdin is recorded like `run_input`'s.
    fn open_pipe(&self, args: &[OsString]) -> Result<super::Piped, DockerError> {
        let at = {
            let mut st = self.state.lock().unwrap();
            let at = st.calls.len();
            st.inputs.push((at, Vec::new()));
            at
        };
        let out = self.run(args)?;
        let (status, stderr) = (out.status, out.stderr_str());
        Ok(super::Piped {
            stdin: Box::new(Recorder { state: self.state.clone(), at }),
            stdout: Box::new(std::io::Cursor::new(out.stdout)),
            wait: Box::new(move || Ok((status, stderr))),
        })
    }

    /// Background calls take the next scripted answer too, in call order.
    fn spawn(&self, args: &[OsString]) -> Result<Box<dyn Background>, DockerError> {
        let out = self.run(args);
        Ok(Box::new(Scripted(Some(out))))
    }
}

/// Appends what is written to the recorded input of call `at`.
struct Recorder {
    state: Arc<Mutex<State>>,
    at: usize,
}

impl std::io::Write for Recorder {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut st = self.state.lock().unwrap();
        if let Some((_, v)) = st.inputs.iter_mut().rev().find(|(i, _)| *i == self.at) {
            v.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Scripted(Option<Result<Output, DockerError>>);

impl Background for Scripted {
    fn wait(mut self: Box<Self>) -> Result<Output, DockerError> {
        self.0.take().expect("waited once")
    }
}
