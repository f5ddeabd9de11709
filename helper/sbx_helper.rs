//! sbx-helper: the tools sbx needs inside a sandbox whose image may have no
//! shell, no coreutils, no tar. Built by build.rs as a static binary (std
//! only, so plain rustc builds it), embedded in sbx, and bind-mounted
//! read-only at /run/sbx/helper in every sandbox. It runs as the sandbox's
//! own user with the sandbox's confinement: it can do nothing the sandbox
//! cannot already do.
//!
//! Commands (argv[1]):
//!   bg HANDLE -- CMD...        start CMD in the background under a supervisor; print its pid
//!   supervise HANDLE -- CMD... (internal) run CMD in its own process group, record pid and exit
//!   ps                         one JSON object per background process
//!   kill HANDLE SIGNUM         signal the process group of HANDLE (exit 3: no such handle, 4: it exited)
//!   kill-exec TOKEN SIGNUM MS  signal the `sbx exec` command started with SBX_EXEC=TOKEN (its
//!                              process group), wait MS for it to end, then SIGKILL what is left
//!   logs HANDLE [-f] [TAIL]    combined output of HANDLE (TAIL lines, or all: -1)
//!   wait-port PORT MILLIS      exit 0 once something listens on PORT, 1 on timeout
//!   relay PORT                 relay stdin/stdout to 127.0.0.1:PORT (or [::1]:PORT)
//!   probe-socket PATH MILLIS   exit 0 once a unix socket is at PATH (within MILLIS), 3 if none
//!                              came, 4 if something else is there (a symlink, FIFO, file ...)
//!   connect PATH MILLIS        relay stdin/stdout to the unix socket at PATH (the relayed
//!                              channel); exit codes as `probe-socket`, and
//!                              5: the connection failed, 6: not accepted within MILLIS
//!   send PATH                  write PATH (file, directory or symlink, never followed) as a record stream
//!                              (send/receive exit 5: no such path, 6: read-only, 7: denied, 8: no space)
//!   receive DEST [--replace|--into]  read a record stream into DEST (--into: the root's
//!                              contents into the existing directory DEST, leaving DEST itself as it is)
//!   list PATH DEPTH LIMIT      PATH's entries, never following a symlink (see fsops.rs for the format)
//!   mkdir PATH [-p]            create a directory (exit 9: exists, 10: not a directory)
//!   stat PATH                  PATH itself as `list` says one entry, never following a symlink
//!   remove PATH                remove a file, a symlink (never followed) or a directory with all it holds
//!   move FROM TO               rename(2) FROM to TO, making TO's missing parents; a link at either
//!                              end is the link itself, never written through; then TO as `stat`
//!                              says it (exit 9: a non-empty directory at TO, 10: not a directory)
//!   watch PATH [-r] [-a]       one line per change below PATH (inotify) until stdin ends;
//!                              -r: below too, -a: attribute changes (chmod, touch) as well
//!                              (exit 10: not a directory, 11: the inotify watch limit)
//!   find-shell                 print the first shell the image has
//!   which CMD                  exit 0 if CMD names an existing file (a path, or a name on $PATH)
//!   run [--stdin] [--pty COLS ROWS] -- CMD...
//!                              run CMD, its pid, stdout, stderr (as they come) and exit as
//!                              frames on stdout (src/workbench/mux.rs); exits 0 once it said how CMD ended;
//!                              --stdin/--pty: input, EOF and resize as frames on stdin;
//!                              --hold: stdin /dev/null for CMD; with any of the three, the
//!                              end of the helper's stdin before CMD's kills CMD
//!   signal-pid PID SIGNUM      signal process PID (exit 3: no such process, or pid 0/1)
//!   idle                       a sandbox's main process instead of the image's program (`sbx serve`):
//!                              reap orphans, exit 0 on SIGTERM/SIGINT/SIGHUP
//!
//! Record stream, version 4: `send` and `receive` speak it through the
//! host's own src/workbench/transfer/wire.rs (format, checks, walk),
//! included below with `#[path]`. The commands were get/put with version 1:
//! a helper of the other version fails clearly.

use std::io::{self, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The record stream's format, decoder, encoder and walk: the host's own
/// file, so the two sides cannot drift.
#[allow(dead_code)]
#[path = "../src/workbench/transfer/wire.rs"]
mod wire;

/// `list`, `mkdir`, `watch`.
#[path = "fsops.rs"]
mod fsops;

/// `run`'s frames: the host's own file, as `wire`.
#[allow(dead_code)]
#[path = "../src/workbench/mux.rs"]
mod mux;

/// Background processes' state (pid, command, exit, log): sbx's own tmpfs,
/// not the sandbox's /tmp, where it cluttered what the sandbox works with.
/// See `argv::BG_DIR` on the host.
const BG: &str = "/run/sbx-bg";

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
    fn getpgid(pid: i32) -> i32;
    fn lseek(fd: i32, offset: i64, whence: i32) -> i64;
    fn utimensat(dirfd: i32, path: *const u8, times: *const [i64; 4], flags: i32) -> i32;
    fn prctl(option: i32, arg2: u64, arg3: u64, arg4: u64, arg5: u64) -> i32;
    #[link_name = "signal"]
    fn set_handler(signum: i32, handler: usize) -> usize;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn _exit(code: i32) -> !;
    fn posix_openpt(flags: i32) -> i32;
    fn grantpt(fd: i32) -> i32;
    fn unlockpt(fd: i32) -> i32;
    fn ptsname_r(fd: i32, buf: *mut u8, len: usize) -> i32;
    fn setsid() -> i32;
    fn ioctl(fd: i32, request: u64, ...) -> i32;
}

extern "C" fn exit_now(_sig: i32) {
    // Async-signal-safe: nothing but the exit itself.
    unsafe { _exit(0) }
}

/// `run [--stdin] [--pty COLS ROWS] -- CMD...`: CMD with both its streams
/// relayed as they come, each chunk a frame, under one lock so frames
/// never interleave. With `--stdin` its stdin is a pipe fed by the input
/// frames on the helper's own stdin (CLOSE is its EOF); with `--pty` it
/// runs on a new pseudo-terminal as the leader of a session of its own,
/// fed the same way, and RESIZE sets the terminal's size.
fn run_muxed(args: &[String]) -> i32 {
    use std::sync::{Arc, Mutex};
    let out = Arc::new(Mutex::new(io::stdout()));
    fn send(out: &Mutex<io::Stdout>, tag: u8, b: &[u8]) -> bool {
        let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
        mux::write_frame(&mut *o, tag, b).is_ok()
    }
    let cmd = after_dashes(args);
    let before = &args[..args.len() - cmd.len()];
    let stdin = before.iter().any(|a| a == "--stdin");
    // The host keeps the helper's stdin open while it relays: its end
    // (sbx gone) ends the command, which no one could reach any more.
    let pty = before.iter().position(|a| a == "--pty").map(|i| {
        let n = |j: usize| before.get(i + j).and_then(|v| v.parse::<u16>().ok()).unwrap_or(0);
        (n(1), n(2))
    });
    let hold = stdin || pty.is_some() || before.iter().any(|a| a == "--hold");
    if cmd.is_empty() {
        return 64;
    }
    let mut command = Command::new(&cmd[0]);
    command.args(&cmd[1..]);
    let term = match pty {
        Some((cols, rows)) => match open_pty(cols, rows) {
            Ok((master, slave)) => {
                let io = |f: &std::fs::File| f.try_clone().map(Stdio::from);
                match (io(&slave), io(&slave)) {
                    (Ok(a), Ok(b)) => command.stdin(Stdio::from(slave)).stdout(a).stderr(b),
                    _ => return report(Err(io::Error::last_os_error())),
                };
                // The command leads a session whose controlling terminal is
                // the pty, so ^C and job control reach it as on a terminal.
                unsafe {
                    command.pre_exec(|| {
                        if setsid() < 0 || ioctl(0, TIOCSCTTY, 0u64) < 0 {
                            return Err(io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                Some(master)
            }
            Err(e) => {
                send(&out, mux::STDERR, format!("sbx-helper: cannot open a terminal: {e}\n").as_bytes());
                send(&out, mux::EXIT, b"126");
                return 0;
            }
        },
        None => {
            command.stdin(if stdin { Stdio::piped() } else { Stdio::null() }).stdout(Stdio::piped()).stderr(Stdio::piped());
            // A group of its own: a kill takes what it started in the
            // background too, which would otherwise hold its output open
            // (and this helper, and the host's docker exec) forever.
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            None
        }
    };
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
            send(&out, mux::STDERR, format!("sbx-helper: cannot run {:?}: {e}\n", cmd[0]).as_bytes());
            send(&out, mux::EXIT, code.to_string().as_bytes());
            return 0;
        }
    };
    // The slave's copies went to the child with `command`: dropping it
    // leaves the child the only holder, so the master reads EIO at its end.
    drop(command);
    send(&out, mux::PID, child.id().to_string().as_bytes());
    let pid = child.id() as i32;
    let exited = Arc::new(std::sync::atomic::AtomicBool::new(false));
    fn pump(mut r: Box<dyn Read + Send>, tag: u8, out: Arc<Mutex<io::Stdout>>) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; mux::MAX_FRAME];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 || !send(&out, tag, &buf[..n]) {
                    break;
                }
            }
        })
    }
    match term {
        Some(master) => {
            let reader = master.try_clone();
            let writer = master.try_clone();
            if let Ok(w) = writer {
                let fd = std::os::fd::AsRawFd::as_raw_fd(&master);
                let exited = exited.clone();
                std::thread::spawn(move || feed(Some(Box::new(w)), Some(fd), -pid, &exited));
            }
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            if let Ok(r) = reader {
                let out = out.clone();
                std::thread::spawn(move || {
                    let _ = pump(Box::new(r), mux::STDOUT, out).join();
                    let _ = done_tx.send(());
                });
            }
            let end = ended(child.wait());
            exited.store(true, std::sync::atomic::Ordering::SeqCst);
            // What the terminal still holds comes first; a process the
            // command left behind that keeps the terminal open does not
            // hold its end back for long.
            let _ = done_rx.recv_timeout(Duration::from_secs(1));
            send(&out, mux::EXIT, end.as_bytes());
            // `master` lives to here: the input thread's fd stays valid.
            drop(master);
        }
        None => {
            if hold {
                let w = child.stdin.take().map(|w| Box::new(w) as Box<dyn Write + Send>);
                let exited = exited.clone();
                std::thread::spawn(move || feed(w, None, -pid, &exited));
            }
            let o = pump(Box::new(child.stdout.take().expect("piped")), mux::STDOUT, out.clone());
            let e = pump(Box::new(child.stderr.take().expect("piped")), mux::STDERR, out.clone());
            let _ = (o.join(), e.join());
            let end = ended(child.wait());
            exited.store(true, std::sync::atomic::Ordering::SeqCst);
            send(&out, mux::EXIT, end.as_bytes());
        }
    }
    0
}

/// How `run`'s command ended: `N` or `signal N`.
fn ended(st: io::Result<std::process::ExitStatus>) -> String {
    match st {
        Ok(st) => match (st.code(), st.signal()) {
            (Some(c), _) => c.to_string(),
            (None, Some(sig)) => format!("signal {sig}"),
            (None, None) => "255".into(),
        },
        Err(_) => "255".into(),
    }
}

/// `run`'s input: frames from the host on the helper's stdin, written to
/// the command (`to`) until CLOSE or the host's end; RESIZE on `tty`.
/// The host's end before the command's (sbx stopped, its docker exec
/// killed) SIGKILLs `target` (the pid, or on a terminal its session's group).
fn feed(mut to: Option<Box<dyn Write + Send>>, tty: Option<i32>, target: i32, exited: &std::sync::atomic::AtomicBool) {
    let mut stdin = io::stdin().lock();
    while let Ok(Some((tag, payload))) = mux::read_input(&mut stdin) {
        match tag {
            mux::INPUT => {
                if let Some(w) = to.as_mut() {
                    if w.write_all(&payload).and_then(|()| w.flush()).is_err() {
                        to = None;
                    }
                }
            }
            mux::CLOSE if tty.is_none() => to = None,
            mux::RESIZE => {
                let text = String::from_utf8_lossy(&payload);
                let mut n = text.split(' ').map(|v| v.parse::<u16>().unwrap_or(0));
                if let (Some(fd), Some(cols), Some(rows)) = (tty, n.next(), n.next()) {
                    set_size(fd, cols, rows);
                }
            }
            _ => {}
        }
    }
    // The host closes its end only once it read the command's end.
    if !exited.load(std::sync::atomic::Ordering::SeqCst) {
        unsafe { kill(target, 9) };
    }
}

const TIOCSCTTY: u64 = 0x540E;
const TIOCSWINSZ: u64 = 0x5414;

/// A new pseudo-terminal of `cols` x `rows`: its master, and its slave
/// (opened without becoming the helper's controlling terminal).
fn open_pty(cols: u16, rows: u16) -> io::Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    const O_RDWR: i32 = 2;
    const O_NOCTTY: i32 = 0o400;
    const O_CLOEXEC: i32 = 0o2000000;
    let fd = unsafe { posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let master = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut name = [0u8; 128];
    if unsafe { grantpt(fd) } != 0
        || unsafe { unlockpt(fd) } != 0
        || unsafe { ptsname_r(fd, name.as_mut_ptr(), name.len()) } != 0
    {
        return Err(io::Error::last_os_error());
    }
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let path = std::str::from_utf8(&name[..len]).map_err(|_| io::Error::other("a pty name that is not UTF-8"))?;
    let slave = std::fs::OpenOptions::new().read(true).write(true).custom_flags(O_NOCTTY).open(path)?;
    set_size(fd, cols, rows);
    Ok((master, slave))
}

/// TIOCSWINSZ: the kernel tells the terminal's foreground group (SIGWINCH).
fn set_size(fd: i32, cols: u16, rows: u16) {
    let ws: [u16; 4] = [rows.max(1), cols.max(1), 0, 0];
    unsafe { ioctl(fd, TIOCSWINSZ, ws.as_ptr()) };
}

/// `signal-pid PID SIGNUM`: one process, as the sandbox's own user (the
/// kernel decides what it may signal); never pid 1, the sandbox itself.
fn signal_pid(pid: i32, sig: i32) -> i32 {
    if pid <= 1 {
        return 3;
    }
    // A command `run` started leads a group of its own: the signal takes
    // what it started too (a background child holding its output open).
    if unsafe { getpgid(pid) } == pid && unsafe { kill(-pid, sig) } == 0 {
        return 0;
    }
    if unsafe { kill(pid, sig) } == 0 {
        return 0;
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(3) {
        return 3;
    }
    eprintln!("sbx-helper: cannot signal {pid}: {err}");
    1
}

/// The main process of a sandbox whose image's program does not run. As
/// pid 1 it gets no signal it has no handler for, so it installs one for
/// SIGTERM (docker stop), SIGINT and SIGHUP; meanwhile it reaps the
/// orphans that `docker exec`'d commands leave, once a second.
fn idle() -> i32 {
    const WNOHANG: i32 = 1;
    for sig in [1, 2, 15] {
        unsafe { set_handler(sig, exit_now as usize) };
    }
    loop {
        let mut status = 0;
        while unsafe { waitpid(-1, &mut status, WNOHANG) } > 0 {}
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Set `path`'s mtime (not following a final symlink: a link gets its own
/// time); the access time is left alone. Best effort, as `tar -x` does.
fn set_mtime(path: &Path, mtime: i64) {
    const AT_FDCWD: i32 = -100;
    const AT_SYMLINK_NOFOLLOW: i32 = 0x100;
    const UTIME_OMIT: i64 = (1 << 30) - 2;
    let mut c = path.as_os_str().as_encoded_bytes().to_vec();
    c.push(0);
    // struct timespec[2]: {tv_sec, tv_nsec} for atime, then mtime (64-bit Linux).
    let times = [0, UTIME_OMIT, mtime, 0];
    unsafe { utimensat(AT_FDCWD, c.as_ptr(), &times, AT_SYMLINK_NOFOLLOW) };
}

const SEEK_DATA: i32 = 3;
const SEEK_HOLE: i32 = 4;

fn main() {
    // Non-dumpable, so no process of the sandbox's user can ptrace this one
    // to forge its answers. Under runc the execute-only file already made it
    // so from exec on; under gVisor the file must be readable (see
    // `host::helper` on the host), so this is what protects it there, from
    // here on. PR_SET_DUMPABLE = 4.
    unsafe { prctl(4, 0, 0, 0, 0) };
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let code = match arg(1).as_str() {
        "bg" => bg(&arg(2), after_dashes(&args)),
        "supervise" => supervise(&arg(2), after_dashes(&args)),
        "ps" => ps(),
        "kill" => signal(&arg(2), arg(3).parse().unwrap_or(15)),
        "kill-exec" => kill_exec(&arg(2), arg(3).parse().unwrap_or(15), arg(4).parse().unwrap_or(2000)),
        "logs" => logs(&arg(2), args.iter().any(|a| a == "-f"), args.last().and_then(|t| t.parse().ok()).unwrap_or(-1)),
        "wait-port" => wait_port(arg(2).parse().unwrap_or(0), arg(3).parse().unwrap_or(0)),
        "relay" => relay(arg(2).parse().unwrap_or(0)),
        "probe-socket" => probe_socket(Path::new(&arg(2)), arg(3).parse().unwrap_or(0)),
        "connect" => connect(Path::new(&arg(2)), arg(3).parse().unwrap_or(10_000)),
        "send" => report(send(Path::new(&arg(2)))),
        "receive" => report(receive(
            Path::new(&arg(2)),
            args.iter().any(|a| a == "--replace"),
            args.iter().any(|a| a == "--into"),
        )),
        "list" => match fsops::list(Path::new(&arg(2)), arg(3).parse().unwrap_or(1), arg(4).parse().unwrap_or(100_000)) {
            Ok(()) => 0,
            // A component that is not a directory: no such path, as ls says.
            Err(e) if e.raw_os_error() == Some(20) => NO_SUCH_PATH,
            r => report(r),
        },
        "mkdir" => match fsops::mkdir(Path::new(&arg(2)), arg(3) == "-p") {
            Ok(()) => 0,
            Err(code) => code,
        },
        "stat" => match fsops::stat(Path::new(&arg(2))) {
            Ok(()) => 0,
            Err(e) if e.raw_os_error() == Some(20) => NO_SUCH_PATH,
            r => report(r),
        },
        "remove" => match fsops::remove(Path::new(&arg(2))) {
            Ok(()) => 0,
            Err(e) if e.raw_os_error() == Some(20) => NO_SUCH_PATH,
            r => report(r),
        },
        "move" => match fsops::rename(Path::new(&arg(2)), Path::new(&arg(3))) {
            Ok(()) => 0,
            Err(code) => code,
        },
        "watch" => {
            let flags: Vec<String> = args.iter().skip(3).cloned().collect();
            fsops::watch(Path::new(&arg(2)), flags.iter().any(|f| f == "-r"), flags.iter().any(|f| f == "-a"))
        }
        "find-shell" => find_shell(),
        "which" => which(&arg(2)),
        "idle" => idle(),
        "run" => run_muxed(&args[2.min(args.len())..]),
        "signal-pid" => signal_pid(arg(2).parse().unwrap_or(0), arg(3).parse().unwrap_or(15)),
        other => {
            eprintln!("sbx-helper: unknown command {other:?}");
            64
        }
    };
    std::process::exit(code);
}

fn after_dashes(args: &[String]) -> &[String] {
    match args.iter().position(|a| a == "--") {
        Some(i) => &args[i + 1..],
        None => &[],
    }
}

/// Exit codes sbx turns into its own messages (src/workbench/helper.rs
/// `helper_exit` has the same table, with fsops.rs's 9 to 11); 1 is any
/// other failure, with a message on stderr.
const NO_PROCESS: i32 = 3;
const EXITED: i32 = 4;
const NO_SUCH_PATH: i32 = 5;
const READ_ONLY: i32 = 6;
const DENIED: i32 = 7;
const NO_SPACE: i32 = 8;

fn report(r: io::Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => match e.raw_os_error() {
            Some(2) => NO_SUCH_PATH,  // ENOENT
            Some(30) => READ_ONLY,    // EROFS
            Some(1 | 13) => DENIED,   // EPERM, EACCES
            Some(28) => NO_SPACE,     // ENOSPC
            _ => {
                eprintln!("sbx-helper: {e}");
                1
            }
        },
    }
}

fn handle_dir(handle: &str) -> Option<PathBuf> {
    let ok = !handle.is_empty() && handle.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    ok.then(|| Path::new(BG).join(handle))
}

/// Start the supervisor detached, wait until CMD has started (or failed to).
fn bg(handle: &str, cmd: &[String]) -> i32 {
    let Some(dir) = handle_dir(handle) else { return 64 };
    if cmd.is_empty() || std::fs::create_dir_all(&dir).is_err() {
        eprintln!("sbx-helper: cannot prepare {}", dir.display());
        return 1;
    }
    let _ = std::fs::write(dir.join("cmd"), cmd.join("\u{0}"));
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/run/sbx/helper"));
    let spawned = Command::new(exe)
        .arg("supervise")
        .arg(handle)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    if let Err(e) = spawned {
        eprintln!("sbx-helper: cannot start the supervisor: {e}");
        return 1;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(err) = std::fs::read_to_string(dir.join("error")) {
            eprintln!("{}", err.trim());
            return std::fs::read_to_string(dir.join("exit")).ok().and_then(|c| c.trim().parse().ok()).unwrap_or(127);
        }
        if let Ok(pid) = std::fs::read_to_string(dir.join("pid")) {
            println!("{}", pid.trim());
            return 0;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!("sbx-helper: {handle} did not start within 10s");
    1
}

fn supervise(handle: &str, cmd: &[String]) -> i32 {
    let Some(dir) = handle_dir(handle) else { return 64 };
    let log = match std::fs::OpenOptions::new().create(true).append(true).open(dir.join("log")) {
        Ok(f) => f,
        Err(_) => return 1,
    };
    let err_log = log.try_clone();
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..]).stdin(Stdio::null()).stdout(log).process_group(0);
    if let Ok(e) = err_log {
        c.stderr(e);
    }
    let mut child = match c.spawn() {
        Ok(ch) => ch,
        Err(e) => {
            let code = if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
            let _ = std::fs::write(dir.join("exit"), format!("{code}\n"));
            let _ = std::fs::write(dir.join("error"), format!("sbx-helper: cannot run {:?}: {e}\n", cmd[0]));
            return code;
        }
    };
    let _ = std::fs::write(dir.join("pid.tmp"), format!("{}\n", child.id()));
    let _ = std::fs::rename(dir.join("pid.tmp"), dir.join("pid"));
    // "N": exited with N; "signal N": ended by signal N (
    // TERM showed as "exit 143", as if the command had chosen that code).
    let status = match child.wait() {
        Ok(st) => match (st.code(), st.signal()) {
            (Some(c), _) => c.to_string(),
            (None, Some(sig)) => format!("signal {sig}"),
            (None, None) => "255".into(),
        },
        Err(_) => "255".into(),
    };
    let _ = std::fs::write(dir.join("exit.tmp"), format!("{status}\n"));
    let _ = std::fs::rename(dir.join("exit.tmp"), dir.join("exit"));
    0
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn ps() -> i32 {
    let mut entries: Vec<(std::time::SystemTime, String)> = std::fs::read_dir(BG)
        .map(|d| {
            d.flatten()
                .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.file_name().into_string().ok()?)))
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    for (_, h) in entries {
        let dir = Path::new(BG).join(&h);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok().map(|s| s.trim().to_string());
        let cmd: Vec<String> = read("cmd").unwrap_or_default().split('\u{0}').map(json_str).collect();
        let pid = read("pid").unwrap_or_else(|| "null".into());
        let exit = read("exit");
        let running = exit.is_none() && Path::new(&format!("/proc/{pid}")).exists();
        let num = |s: &str| s.trim().parse::<i64>().ok().map_or("null".to_string(), |n| n.to_string());
        let (code, sig) = match exit.as_deref() {
            Some(e) => match e.strip_prefix("signal ") {
                Some(sig) => ("null".to_string(), num(sig)),
                None => (num(e), "null".to_string()),
            },
            None => ("null".to_string(), "null".to_string()),
        };
        println!(
            "{{\"handle\":{},\"pid\":{},\"command\":[{}],\"running\":{},\"exit_code\":{},\"signal\":{}}}",
            json_str(&h),
            num(&pid),
            cmd.join(","),
            running,
            code,
            sig
        );
    }
    0
}

fn signal(handle: &str, sig: i32) -> i32 {
    let Some(dir) = handle_dir(handle) else { return 64 };
    let Some(pid) = std::fs::read_to_string(dir.join("pid")).ok().and_then(|p| p.trim().parse::<i32>().ok()) else {
        return NO_PROCESS;
    };
    if dir.join("exit").exists() {
        return EXITED;
    }
    // The whole process group: the command and every child it started.
    if unsafe { kill(-pid, sig) } != 0 {
        eprintln!("sbx-helper: kill {handle}: {}", io::Error::last_os_error());
        return 1;
    }
    0
}

/// Processes whose environment holds SBX_EXEC=TOKEN (the `sbx exec`
/// command and what it started), each with its process group id.
fn exec_processes(token: &str) -> Vec<(i32, i32)> {
    let want = format!("SBX_EXEC={token}");
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else { continue };
        if !env.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
            continue;
        }
        // Field 5 of stat, counted after the ")" that ends the command name.
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let pgid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse().ok());
        found.push((pid, pgid.unwrap_or(pid)));
    }
    found
}

fn signal_all(procs: &[(i32, i32)], sig: i32) {
    for &(pid, pgid) in procs {
        // A group leader (runc makes every exec'd command one) takes its
        // whole group, as a terminal's Ctrl-C would; anyone else, alone.
        let target = if pid == pgid { -pid } else { pid };
        unsafe { kill(target, sig) };
    }
}

fn wait_gone(token: &str, millis: u64) -> bool {
    let deadline = Instant::now() + Duration::from_millis(millis);
    loop {
        if exec_processes(token).is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// sbx got a signal while `sbx exec` ran: pass it on, give the command
/// `grace` ms to end, then SIGKILL what is left.
fn kill_exec(token: &str, sig: i32, grace: u64) -> i32 {
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return 64;
    }
    // The signal may come before docker has started the command: look for a moment.
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut procs = exec_processes(token);
    while procs.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        procs = exec_processes(token);
    }
    if procs.is_empty() {
        return 1;
    }
    signal_all(&procs, sig);
    if wait_gone(token, grace) {
        return 0;
    }
    signal_all(&exec_processes(token), 9);
    if wait_gone(token, 2000) {
        0
    } else {
        1
    }
}

fn logs(handle: &str, follow: bool, tail: i64) -> i32 {
    let Some(dir) = handle_dir(handle) else { return 64 };
    let path = dir.join("log");
    let Ok(mut f) = std::fs::File::open(&path) else {
        return NO_PROCESS;
    };
    let mut all = Vec::new();
    let _ = f.read_to_end(&mut all);
    let start = match tail {
        t if t < 0 => 0,
        0 => all.len(),
        t => {
            // The start of the last `t` lines; a final newline ends the last line.
            let end = if all.last() == Some(&b'\n') { all.len() - 1 } else { all.len() };
            let mut seen = 0;
            let mut start = 0;
            for i in (0..end).rev() {
                if all[i] == b'\n' {
                    seen += 1;
                    if seen == t {
                        start = i + 1;
                        break;
                    }
                }
            }
            start
        }
    };
    let out = io::stdout();
    let mut out = out.lock();
    let _ = out.write_all(&all[start..]);
    let _ = out.flush();
    if follow {
        let mut buf = vec![0u8; 65536];
        loop {
            match f.read(&mut buf) {
                Ok(0) => {
                    if dir.join("exit").exists() {
                        // One last read: the process may have written just before exiting.
                        while let Ok(n) = f.read(&mut buf) {
                            if n == 0 {
                                break;
                            }
                            let _ = out.write_all(&buf[..n]);
                        }
                        let _ = out.flush();
                        return 0;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(n) => {
                    if out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                        return 0;
                    }
                }
                Err(_) => return 1,
            }
        }
    }
    0
}

fn listening(port: u16) -> bool {
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 3 && f[3] == "0A" {
                if let Some(p) = f[1].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok()) {
                    if p == port {
                        return true;
                    }
                }
            }
        }
    }
    false
}

fn wait_port(port: u16, millis: u64) -> i32 {
    let deadline = Instant::now() + Duration::from_millis(millis);
    loop {
        if listening(port) {
            return 0;
        }
        if Instant::now() >= deadline {
            return 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn relay(port: u16) -> i32 {
    let stream = TcpStream::connect(("127.0.0.1", port)).or_else(|_| TcpStream::connect(("::1", port)));
    let stream = match stream {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sbx-helper: nothing accepts on port {port} in the sandbox: {e}");
            return 1;
        }
    };
    let mut up = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return 1,
    };
    let writer = std::thread::spawn(move || {
        let _ = pump(&mut io::stdin().lock(), &mut up);
        let _ = up.shutdown(Shutdown::Write);
    });
    let mut down = stream;
    let _ = pump(&mut down, &mut io::stdout().lock());
    let _ = writer.join();
    0
}

/// Copy until EOF with one read(2) and one write(2) per chunk, flushed.
/// Never `io::copy`: on Linux it becomes splice(2) between a socket and a
/// pipe, which held a request back until the client half-closed.
fn pump(r: &mut impl Read, w: &mut impl Write) -> io::Result<()> {
    let mut buf = vec![0u8; 65536];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        w.write_all(&buf[..n])?;
        w.flush()?;
    }
}

/// Exit codes of `probe-socket` and `connect`, which the host's
/// `channel` module reads (both must agree).
const NO_SOCKET: i32 = 3;
const NOT_A_SOCKET: i32 = 4;
const CONNECT_FAILED: i32 = 5;
const NOT_ACCEPTING: i32 = 6;
const O_PATH: i32 = 0o10000000;
const O_NOFOLLOW: i32 = 0o400000;

/// Open the entry at `path` itself, never what a symlink there names, as
/// an O_PATH descriptor, and require a unix socket (the
/// sandbox controls /run/sandbox and may put anything there). Err: exit code.
fn open_socket(path: &Path) -> Result<std::fs::File, i32> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let f = match std::fs::OpenOptions::new().read(true).custom_flags(O_PATH | O_NOFOLLOW).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(NO_SOCKET),
        Err(e) => {
            eprintln!("sbx-helper: cannot open {}: {e}", path.display());
            return Err(CONNECT_FAILED);
        }
    };
    let ft = match f.metadata() {
        Ok(md) => md.file_type(),
        Err(e) => {
            eprintln!("sbx-helper: cannot stat {}: {e}", path.display());
            return Err(CONNECT_FAILED);
        }
    };
    if ft.is_socket() {
        return Ok(f);
    }
    let what = if ft.is_symlink() {
        "a symlink"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_file() {
        "a regular file"
    } else if ft.is_dir() {
        "a directory"
    } else {
        "not a socket"
    };
    eprintln!("sbx-helper: {} is {what}, not a unix socket", path.display());
    Err(NOT_A_SOCKET)
}

/// Readiness through the relayed channel: poll (2 ms, backing off to 20 ms)
/// until a socket is at `path` or `millis` pass.
fn probe_socket(path: &Path, millis: u64) -> i32 {
    let deadline = Instant::now() + Duration::from_millis(millis);
    let mut delay = Duration::from_millis(2);
    loop {
        match open_socket(path) {
            Ok(_) => return 0,
            Err(NO_SOCKET) if Instant::now() < deadline => {}
            Err(code) => return code,
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(20));
    }
}

/// The relayed channel: connect to the socket through /proc/self/fd/N (the
/// inode checked, whatever the path names a moment later), then relay
/// stdin to it and it to stdout, each chunk as it comes (never io::copy,
/// which waits to fill its buffer). EOF on stdin is passed on as shutdown(SHUT_WR); EOF
/// from the socket ends the helper at once, which closes stdout.
fn connect(path: &Path, millis: u64) -> i32 {
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    let deadline = Instant::now() + Duration::from_millis(millis);
    let file = match open_socket(path) {
        Ok(f) => f,
        Err(NO_SOCKET) => {
            eprintln!("sbx-helper: nothing is bound at {}", path.display());
            return NO_SOCKET;
        }
        Err(code) => return code,
    };
    let via = format!("/proc/self/fd/{}", file.as_raw_fd());
    // connect(2) blocks while the listener's accept queue is full, and the
    // sandbox decides whether it ever drains: connect on a thread and stop
    // waiting at the deadline. Refused (bound, not yet
    // listening) is retried for up to 2 s.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let grace = Instant::now() + Duration::from_secs(2);
        loop {
            match UnixStream::connect(&via) {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && Instant::now() < grace => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                r => {
                    let _ = tx.send(r);
                    return;
                }
            }
        }
    });
    let stream = match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            eprintln!("sbx-helper: cannot connect to {}: {e}", path.display());
            return CONNECT_FAILED;
        }
        Err(_) => {
            eprintln!("sbx-helper: {} did not accept the connection", path.display());
            return NOT_ACCEPTING;
        }
    };
    drop(file);
    let Ok(mut up) = stream.try_clone() else { return CONNECT_FAILED };
    std::thread::spawn(move || {
        let _ = pump(&mut io::stdin().lock(), &mut up);
        let _ = up.shutdown(Shutdown::Write);
    });
    let mut down = stream;
    let _ = pump(&mut down, &mut io::stdout().lock());
    // The sandbox closed its side: end now, whatever stdin still holds.
    std::process::exit(0)
}

/// Write PATH as a record stream on stdout, by the walk the host uses too.
fn send(src: &Path) -> io::Result<()> {
    let name = src.file_name().and_then(|n| n.to_str()).filter(|n| !n.is_empty()).unwrap_or(".").to_string();
    // The entry itself, named in its parent (`/` and the like: itself, as ".").
    let parent = match src.file_name() {
        Some(_) => src.parent().unwrap_or(Path::new("")).to_path_buf(),
        None => src.to_path_buf(),
    };
    let mut enc = wire::Encoder::new(BufWriter::new(io::stdout().lock()))?;
    wire::send_tree(&mut Paths, &parent, name.as_bytes(), name.as_bytes(), &mut enc)?;
    enc.end().map(drop)
}

/// The helper's [`wire::Tree`]: entries by path, never following a symlink
/// (a link is sent as a link; a file is opened with O_NOFOLLOW).
struct Paths;

impl wire::Tree for Paths {
    type Dir = PathBuf;
    type File = Sent;

    fn node(&mut self, dir: &PathBuf, name: &[u8], _rel: &[u8]) -> io::Result<wire::Node<PathBuf, Sent>> {
        let path = dir.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name));
        let md = std::fs::symlink_metadata(&path)?;
        let (mode, mtime) = (md.mode() & 0o7777, md.mtime());
        Ok(if md.file_type().is_symlink() {
            let target = std::fs::read_link(&path)?.into_os_string().into_encoded_bytes();
            wire::Node::Symlink { mode, mtime, target }
        } else if md.is_dir() {
            wire::Node::Dir { mode, mtime, dir: path }
        } else if md.is_file() {
            let file = std::fs::OpenOptions::new().read(true).custom_flags_nofollow().open(&path)?;
            let md = file.metadata()?;
            if md.len() == 0 {
                // The kernel's files (/proc, /sys) say 0 and have content: read
                // whole, within a cap, so the record's size is what was read.
                let mut data = Vec::new();
                io::Read::read_to_end(&mut io::Read::take(&file, EMPTY_CAP + 1), &mut data)?;
                if data.len() as u64 > EMPTY_CAP {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: its size says 0 but it holds more than 4 MiB; copy it with a command (cat)", path.display()),
                    ));
                }
                return Ok(wire::Node::File { mode, mtime: md.mtime(), size: data.len() as u64, file: Sent::Read(data) });
            }
            wire::Node::File { mode, mtime: md.mtime(), size: md.len(), file: Sent::Disk(file) }
        } else {
            wire::Node::Skip
        })
    }

    fn names(&mut self, dir: &PathBuf) -> io::Result<Vec<Vec<u8>>> {
        // Every name, as bytes; a readdir that fails fails the copy (it
        // used to drop the entry, and names that are not UTF-8, unsaid).
        std::fs::read_dir(dir)?.map(|e| Ok(e?.file_name().into_encoded_bytes())).collect()
    }
}

/// The most a file whose size says 0 is read (whole, into memory) to send it.
const EMPTY_CAP: u64 = 4 * 1024 * 1024;

/// A file as sent: from disk by offset (holes kept), or read whole already.
enum Sent {
    Disk(std::fs::File),
    Read(Vec<u8>),
}

impl wire::SparseFile for Sent {
    fn next_data(&mut self, pos: u64) -> io::Result<Option<u64>> {
        use std::os::unix::io::AsRawFd;
        let Sent::Disk(file) = self else { return Ok(Some(pos)) };
        let start = unsafe { lseek(file.as_raw_fd(), pos as i64, SEEK_DATA) };
        if start >= 0 {
            return Ok(Some(start as u64));
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(6) => Ok(None), // ENXIO: no data after pos
            _ => Ok(Some(pos)),  // no hole support: the rest is data
        }
    }

    fn next_hole(&mut self, pos: u64, size: u64) -> u64 {
        use std::os::unix::io::AsRawFd;
        let Sent::Disk(file) = self else { return size };
        let hole = unsafe { lseek(file.as_raw_fd(), pos as i64, SEEK_HOLE) };
        if hole < 0 {
            size
        } else {
            hole as u64
        }
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        match self {
            Sent::Disk(file) => std::os::unix::fs::FileExt::read_at(file, buf, at),
            Sent::Read(data) => {
                let rest = data.get(at as usize..).unwrap_or(&[]);
                let n = rest.len().min(buf.len());
                buf[..n].copy_from_slice(&rest[..n]);
                Ok(n)
            }
        }
    }
}

trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        // O_NOFOLLOW on Linux (all architectures sbx builds for).
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, 0o400000)
    }
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Refuse a destination reached through a symlink the sandbox planted: a
/// copy goes exactly where it was named, or nowhere.
fn no_symlinks(path: &Path) -> io::Result<()> {
    let mut cur = PathBuf::new();
    for c in path.components() {
        cur.push(c);
        if let Ok(md) = std::fs::symlink_metadata(&cur) {
            if md.file_type().is_symlink() {
                return Err(bad(format!("{} is a symlink; refusing to write through it", cur.display())));
            }
        }
    }
    Ok(())
}

/// Read a record stream from stdin into DEST. The host chose what it sends
/// and capped it, so no limits here; names are checked all the same (the
/// decoder refuses any entry outside the stream's root).
fn receive(dest: &Path, replace: bool, into: bool) -> io::Result<()> {
    let mut r = io::BufReader::new(io::stdin().lock());
    // Before anything changes: a stream of another version is refused.
    match wire::read_magic(&mut r)? {
        wire::Start::Magic => {}
        wire::Start::Empty => return Err(bad("no record stream on stdin".into())),
        wire::Start::Cut => return Err(bad("the record stream on stdin ended in its first bytes".into())),
        wire::Start::Other(..) => return Err(bad("stdin is not sbx's record stream version 4".into())),
    }
    no_symlinks(dest)?;
    let into_dir = std::fs::symlink_metadata(dest).map(|m| m.is_dir()).unwrap_or(false);
    if into && !into_dir {
        return Err(bad(format!("{} is not a directory", dest.display())));
    }
    if replace && !into_dir {
        std::fs::create_dir_all(dest)?;
    }
    if replace && into_dir {
        for e in std::fs::read_dir(dest)?.flatten() {
            let p = e.path();
            if e.file_type()?.is_dir() {
                std::fs::remove_dir_all(&p)?;
            } else {
                std::fs::remove_file(&p)?;
            }
        }
    }
    let mut dec = wire::Decoder::after_magic(r, None, wire::Limits::UNLIMITED);
    let mut dirs: Vec<(PathBuf, u32, i64)> = Vec::new();
    while let Some(rec) = dec.next_record()? {
        let rel_path = Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&rec.path));
        // Into an existing directory the top-level name is kept; otherwise
        // (and when replacing) DEST itself takes the top-level entry's place.
        let strip = replace || into || !into_dir;
        let rest: PathBuf = rel_path.components().skip(1).collect();
        if into && rest.as_os_str().is_empty() {
            // `cp - ID:/dir`: the archive's root is DEST, which keeps its own mode and time.
            if rec.kind != wire::Kind::Dir {
                return Err(bad("the archive's root is not a directory".into()));
            }
            continue;
        }
        let target = match (strip, rest.as_os_str().is_empty()) {
            (true, true) => dest.to_path_buf(),
            (true, false) => dest.join(rest),
            (false, _) => dest.join(rel_path),
        };
        no_symlinks(target.parent().unwrap_or(dest))?;
        match rec.kind {
            wire::Kind::Dir => {
                if !target.is_dir() {
                    std::fs::create_dir_all(&target)?;
                }
                dirs.push((target, rec.mode, rec.mtime));
            }
            wire::Kind::File { size } => {
                if std::fs::symlink_metadata(&target).map(|m| m.file_type().is_symlink()).unwrap_or(false) {
                    std::fs::remove_file(&target)?;
                }
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .custom_flags_nofollow()
                    .open(&target)?;
                wire::fill(&f, size, &mut dec)?;
                std::fs::set_permissions(&target, std::fs::Permissions::from_mode(rec.mode))?;
                set_mtime(&target, rec.mtime);
            }
            wire::Kind::Symlink { target: to } => {
                let _ = std::fs::remove_file(&target);
                std::os::unix::fs::symlink(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&to), &target)?;
                set_mtime(&target, rec.mtime);
            }
        }
    }
    // Directory times and modes last, so a read-only directory can still
    // be filled and adding entries does not change its time again.
    for (d, mode, mtime) in dirs.into_iter().rev() {
        set_mtime(&d, mtime);
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

fn find_shell() -> i32 {
    for sh in ["/bin/bash", "/bin/sh", "/usr/bin/bash", "/usr/bin/sh", "/bin/ash", "/bin/zsh"] {
        if Path::new(sh).exists() {
            println!("{sh}");
            return 0;
        }
    }
    1
}

fn which(cmd: &str) -> i32 {
    if cmd.contains('/') {
        return if Path::new(cmd).exists() { 0 } else { 1 };
    }
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    if path.split(':').any(|d| !d.is_empty() && Path::new(d).join(cmd).exists()) {
        0
    } else {
        1
    }
}
