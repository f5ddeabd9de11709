//! A scripted stand-in for the docker CLI, for unit tests only (not built
//! into sbx).
//!
//! Answers are replayed in order; every invocation is recorded whole (argv,
//! what was written to its stdin, how its streams were attached) so a test
//! can compare the exact calls. An unscripted call panics, so a test cannot
//! pass while sbx makes calls nobody expected; so does an answer left
//! unused when the last handle goes, so a call that silently stopped
//! happening fails its test too.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::{Background, DockerError, DockerExec, Invocation, Mode, ModeKind, Outcome, Output, Piped, Streamed};

type Hook = Box<dyn FnOnce(&[String]) + Send>;

enum Answer {
    Output(Output, Option<Hook>),
    SpawnFails,
    TimesOut(std::time::Duration),
    /// Prints its stdout, then is cut by the runner's watch on its sandbox.
    Ended(Output, String),
}

/// One recorded invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub args: Vec<String>,
    /// What sbx wrote to its stdin: the input of a captured or streamed
    /// call, everything written to a piped one; None when it had none.
    pub stdin: Option<Vec<u8>>,
    pub mode: ModeKind,
}

#[derive(Default)]
struct State {
    answers: VecDeque<Answer>,
    calls: Vec<Call>,
}

impl Drop for State {
    fn drop(&mut self) {
        if !self.answers.is_empty() && !std::thread::panicking() {
            let made: Vec<String> = self.calls.iter().map(|c| verb(&c.args)).collect();
            panic!("{} scripted docker answer(s) never used; the calls made: {made:?}", self.answers.len());
        }
    }
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

    /// The next call prints `stdout`, then is cut because its sandbox
    /// (container `container`) ended (`DockerError::Ended`: from a piped
    /// call's `wait`, from any other at once).
    pub fn push_ended(&self, stdout: &str, container: &str) -> &Self {
        self.state.lock().unwrap().answers.push_back(Answer::Ended(Output::ok(stdout), container.into()));
        self
    }

    /// Every invocation so far, whole, in order.
    pub fn invocations(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// Every argv run or spawned so far, in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        self.invocations().into_iter().map(|c| c.args).collect()
    }

    /// Just the docker subcommands, e.g. `["image inspect", "run"]`.
    pub fn verbs(&self) -> Vec<String> {
        self.calls().iter().map(|c| verb(c)).collect()
    }

    /// Every call as one line, its `--format` template left out, e.g.
    /// `container inspect -- sbx-0123456789ab`: which calls were made on
    /// what, for tests whose templates the argv builders' own tests pin.
    pub fn brief(&self) -> Vec<String> {
        self.calls()
            .iter()
            .map(|c| {
                let mut words: Vec<&str> = Vec::with_capacity(c.len());
                let mut args = c.iter();
                while let Some(a) = args.next() {
                    // After `--` every word is an operand, `--format` too.
                    if a == "--" {
                        words.extend(std::iter::once(a).chain(args.by_ref()).map(String::as_str));
                    } else if a == "--format" {
                        args.next();
                    } else {
                        words.push(a);
                    }
                }
                words.join(" ")
            })
            .collect()
    }

    /// Stdin given to calls, as (index into `calls`, bytes).
    pub fn inputs(&self) -> Vec<(usize, Vec<u8>)> {
        self.invocations().into_iter().enumerate().filter_map(|(i, c)| Some((i, c.stdin?))).collect()
    }

    pub fn remaining(&self) -> usize {
        self.state.lock().unwrap().answers.len()
    }

    /// Record the call and take its scripted answer.
    fn answer(&self, call: Call) -> Result<Output, DockerError> {
        self.answer_at(call).1
    }

    /// Like `answer`, with the call's index in `calls`.
    fn answer_at(&self, call: Call) -> (usize, Result<Output, DockerError>) {
        let argv = call.args.clone();
        let (at, answer) = {
            let mut st = self.state.lock().unwrap();
            st.calls.push(call);
            (st.calls.len() - 1, st.answers.pop_front())
        };
        let out = match answer {
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
            Some(Answer::TimesOut(after)) => Err(DockerError::Timeout {
                command: super::verb(&argv.iter().map(Into::into).collect::<Vec<_>>()),
                after,
            }),
            Some(Answer::Ended(_, container)) => Err(DockerError::Ended { container }),
            None => panic!("unscripted docker call: {argv:?}"),
        };
        (at, out)
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

impl DockerExec for FakeDocker {
    /// Captured: the scripted output. Background: the next answer, taken in
    /// call order. Terminal: its status and stderr. Streamed: what `input`
    /// writes is recorded, the scripted stdout goes to `output`. Piped: the
    /// scripted stdout is what the process prints, what sbx writes to its
    /// stdin is recorded as it comes.
    fn execute(&self, inv: Invocation<'_>) -> Result<Outcome, DockerError> {
        let kind = inv.mode.kind();
        let args: Vec<String> = inv.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        let call = |stdin| Call { args: args.clone(), stdin, mode: kind };
        Ok(match inv.mode {
            Mode::Captured { input } => Outcome::Output(self.answer(call(input.map(<[u8]>::to_vec)))?),
            Mode::Background => Outcome::Background(Box::new(Scripted(Some(self.answer(call(None)))))),
            Mode::Terminal(_) => {
                let out = self.answer(call(None))?;
                Outcome::Terminal { status: out.status, held: out.stderr_str() }
            }
            Mode::Streamed { input, output } => {
                let mut written = Vec::new();
                let input_r = input.map(|f| f(&mut written));
                let out = self.answer(call(input_r.is_some().then_some(written)))?;
                let output_r = output(&mut out.stdout.as_slice());
                Outcome::Streamed(Streamed {
                    status: out.status,
                    stderr: out.stderr,
                    input: input_r.unwrap_or(Ok(())),
                    output: output_r,
                })
            }
            Mode::Piped => {
                let ended = {
                    let mut st = self.state.lock().unwrap();
                    match st.answers.front() {
                        Some(Answer::Ended(out, c)) => {
                            let (out, c) = (out.clone(), c.clone());
                            st.answers.pop_front();
                            st.answers.push_front(Answer::Output(out, None));
                            Some(c)
                        }
                        _ => None,
                    }
                };
                let (at, out) = self.answer_at(call(Some(Vec::new())));
                let out = out?;
                let (status, stderr) = (out.status, out.stderr_str());
                if let Some(container) = ended {
                    return Ok(Outcome::Piped(Piped {
                        stdin: Box::new(Recorder { state: self.state.clone(), at }),
                        stdout: Box::new(std::io::Cursor::new(out.stdout)),
                        wait: Box::new(move || Err(DockerError::Ended { container })),
                        stop: Box::new(|| {}),
                    }));
                }
                Outcome::Piped(Piped {
                    stdin: Box::new(Recorder { state: self.state.clone(), at }),
                    stdout: Box::new(std::io::Cursor::new(out.stdout)),
                    wait: Box::new(move || Ok((status, stderr))),
                    stop: Box::new(|| {}),
                })
            }
        })
    }
}

/// Appends what is written to the recorded stdin of call `at`.
struct Recorder {
    state: Arc<Mutex<State>>,
    at: usize,
}

impl std::io::Write for Recorder {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut st = self.state.lock().unwrap();
        if let Some(v) = st.calls.get_mut(self.at).and_then(|c| c.stdin.as_mut()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "1 scripted docker answer(s) never used; the calls made: [\"ps\"]")]
    fn an_answer_left_unused_fails_the_test() {
        let fake = FakeDocker::new();
        fake.push(Output::ok("")).push(Output::ok(""));
        let _ = fake.run(&["ps".into()]);
        assert_eq!(fake.calls(), [["ps"]]);
    }

    #[test]
    fn answers_all_used_pass() {
        let fake = FakeDocker::new();
        fake.push(Output::ok(""));
        let _ = fake.run(&["ps".into()]);
        assert_eq!(fake.calls(), [["ps"]]);
    }

    #[test]
    fn brief_leaves_out_only_the_format_template() {
        let fake = FakeDocker::new();
        fake.push(Output::ok("")).push(Output::ok(""));
        let inspect = ["container", "inspect", "--format", "{{json .}}", "--", "sbx-0123456789ab"];
        let _ = fake.run(&inspect.map(Into::into));
        let _ = fake.run(&["rm", "-f", "--", "--format"].map(Into::into));
        assert_eq!(fake.brief(), ["container inspect -- sbx-0123456789ab", "rm -f -- --format"]);
        assert_eq!(fake.calls()[0], inspect, "the calls themselves keep it");
    }
}
