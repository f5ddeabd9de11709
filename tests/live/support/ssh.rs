//! The one engine here, reached as a remote one: Debian's
//! openssh-server `sshd` on a free 127.0.0.1 port, its own host and client
//! keys and config in a temp dir, killed in `Drop`. The docker CLI's ssh
//! helper runs `ssh` from PATH, and ssh reads `~/.ssh` from the passwd entry
//! (not $HOME): so [`Remote::env`] puts a wrapper `ssh` first on PATH that
//! adds `-F` with this rig's client config (its key, its known_hosts).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";

pub struct Remote {
    dir: PathBuf,
    sshd: Child,
    pub port: u16,
}

fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .expect("spawn ssh-keygen");
    assert!(out.status.success(), "ssh-keygen: {}", String::from_utf8_lossy(&out.stderr));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Remote {
    /// Start sshd and wait until `docker version` answers through it.
    pub fn start() -> Self {
        // Fail, never skip: `.ci/run` installs openssh-server.
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: install Debian's openssh-server (.ci/run does) to test remote engines"
        );
        let dir = PathBuf::from("/tmp").join(super::unique("sbxt-ssh-"));
        std::fs::create_dir_all(&dir).unwrap();
        keygen(&dir.join("host_key"));
        keygen(&dir.join("client_key"));
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
        // sshd's privilege separation directory (systemd makes it at boot).
        std::fs::create_dir_all("/run/sshd").unwrap();
        let port = free_port();
        let d = dir.display();
        std::fs::write(
            dir.join("sshd_config"),
            format!(
                "ListenAddress 127.0.0.1\nPort {port}\nHostKey {d}/host_key\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nAuthorizedKeysFile {d}/authorized_keys\n\
                 StrictModes no\nUsePAM no\nPidFile none\nMaxSessions 100\nMaxStartups 100\n"
            ),
        )
        .unwrap();
        let host_pub = std::fs::read_to_string(dir.join("host_key.pub")).unwrap();
        std::fs::write(dir.join("known_hosts"), format!("[127.0.0.1]:{port} {host_pub}")).unwrap();
        std::fs::write(
            dir.join("ssh_config"),
            format!(
                "Host 127.0.0.1\n  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n\
                 \x20 StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n"
            ),
        )
        .unwrap();
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let wrapper = bin.join("ssh");
        std::fs::write(&wrapper, format!("#!/bin/sh\nexec /usr/bin/ssh -F '{d}/ssh_config' \"$@\"\n")).unwrap();
        std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let sshd = Command::new(SSHD)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(dir.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("sshd.log")).unwrap())
            .spawn()
            .expect("spawn sshd");
        let remote = Remote { dir, sshd, port };
        remote.wait_ready();
        remote
    }

    /// `ssh://root@127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ssh://root@127.0.0.1:{}", self.port)
    }

    /// PATH with this rig's `ssh` first.
    pub fn path(&self) -> String {
        format!("{}:{}", self.dir.join("bin").display(), std::env::var("PATH").unwrap_or_default())
    }

    /// The environment that makes sbx (and docker) drive the engine through ssh.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("DOCKER_HOST".into(), self.url()), ("PATH".into(), self.path())]
    }

    /// A DOCKER_CONFIG of this rig's own (contexts made there never touch ~/.docker).
    pub fn docker_config(&self) -> PathBuf {
        let d = self.dir.join("docker-config");
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// `docker ARGS` with `env` and this rig's ssh on PATH.
    pub fn docker(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let mut cmd = Command::new("docker");
        cmd.args(args).env("PATH", self.path()).env_remove("DOCKER_HOST").stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("spawn docker")
    }

    fn wait_ready(&self) {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let out = self.docker(&["version", "--format", "{{.Server.Version}}"], &[("DOCKER_HOST", &self.url())]);
            if out.status.success() {
                return;
            }
            if Instant::now() > until {
                let log = std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default();
                panic!("docker over ssh does not answer: {}\nsshd log:\n{log}", String::from_utf8_lossy(&out.stderr));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
