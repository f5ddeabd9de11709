//! The help texts' tails: the exit codes and environment after `sbx --help`,
//! and each subcommand's examples (help texts).

pub const AFTER_HELP: &str = "\
Exit codes: 0 success, 1 the operation failed, 2 invalid input (nothing was created),
130/143 interrupted by SIGINT/SIGTERM (after removing what was made).

Environment: SBX_SOCKET_DIR (socket root), SBX_DATA_DIR (state), SBX_STRICT_EGRESS=1 (as --strict-egress),
SBX_DOCKER (docker CLI to run), SBX_DOCKER_TIMEOUT (how long a docker look-up may take, default 30s;
changes get 4x; a stream such as exec or logs -f must get an answer about its
sandbox within 1s plus that), SBX_SECCOMP_PROFILE (as create --seccomp-profile),
SBX_RUNTIME (as create and doctor --runtime), SBX_PULL (as create --pull),
SBX_PULL_TIMEOUT (how long create's pull may take, default 10m), SBX_CONTEXT (as --context),
DOCKER_HOST, DOCKER_CONTEXT (passed to docker; an ssh:// or tcp:// engine is remote, see `sbx doctor`),
RUST_LOG (tracing).

Progress: long steps (a pull, --clone, sbx's own image, a pool fill) show one status line on
stderr when it is a terminal; piped, with --json or with -v nothing is shown.";

pub const EX_CREATE: &str = "Examples:\n  sbx create --image repo@sha256:<64 hex>
  sbx create --image registry.example:5000/team/agent@sha256:<64 hex>    # pulled by digest if missing
  sbx create --pull never --image repo@sha256:<64 hex>    # fail instead of pulling
  sbx create --image IMG --session task-42 --persist --ttl 2h    # /state at most 2 GiB, kept
  sbx create --image IMG --session task-42 --persist --persist-size 8GiB    # grown to 8 GiB
  sbx create --image IMG --session task-42 --persist --persist-size unbounded    # non-root or remote
  sbx create --image IMG --route inference:proxy:8080 --private-routes
  sbx create --image IMG --runtime runsc    # gVisor: a kernel of its own (sbx doctor --runtime runsc)
  sbx create --image IMG --allow pypi.org --allow files.pythonhosted.org --allow github.com
  sbx create --image IMG --egress observe --ttl 30m
  sbx create --pool agents --session task-42 --ttl 30m    # a ready sandbox from a warm pool (sbx pool)
  sbx --json create --image IMG -- /bin/server --verbose    # \"user\": the uid sbx gave it
  sbx create --image IMG --rw ./project:/work --user 1000    # share a --rw dir of uid 1000";
pub const EX_CONNECT: &str = "Examples:\n  echo hello | sbx connect sbx-0123456789ab
  sbx connect --timeout 30s sbx-0123456789ab < request.json";
pub const EX_REVOKE: &str = "Examples:\n  sbx revoke sbx-0123456789ab inference
  sbx revoke sbx-0123456789ab egress
  sbx revoke sbx-0123456789ab all";
pub const EX_DESTROY: &str = "Examples:\n  sbx destroy sbx-0123456789ab
  sbx destroy --purge sbx-0123456789ab sbx-0123456789cd";
pub const EX_STOP: &str = "Examples:\n  sbx stop sbx-0123456789ab
  sbx stop --grace 30s sbx-0123456789ab";
pub const EX_START: &str = "Examples:\n  sbx start sbx-0123456789ab
  sbx --json start --socket-wait 2m sbx-0123456789ab";
pub const EX_PAUSE: &str = "Examples:\n  sbx pause sbx-0123456789ab";
pub const EX_RESUME: &str =
    "Examples:\n  sbx resume sbx-0123456789ab      # thaws it if paused, restores it if hibernated";
pub const EX_CHECKPOINT: &str = "Examples:
  id=$(sbx create --snapshots --image repo@sha256:<digest>)
  sbx checkpoint \"$id\" --name before-fix     # prints before-fix; the sandbox keeps running
  sbx checkpoint \"$id\"                       # a name of sbx's own: c-<seconds since the epoch>";
pub const EX_CHECKPOINTS: &str = "Examples:
  sbx checkpoints                          # every sandbox's: sandbox, name, size, time
  sbx --json checkpoints sbx-0123456789ab
  sbx checkpoints rm sbx-0123456789ab before-fix";
pub const EX_FORK: &str = "Examples:
  id=$(sbx create --snapshots --image repo@sha256:<digest>)
  sbx fork \"$id\" --count 3                  # three ids, one a line; each carries on from now
  sbx checkpoint \"$id\" --name half-built
  sbx fork \"$id\" --from half-built           # works after \"$id\" is destroyed too
  sbx --json fork \"$id\" --count 2 | jq -r '.[].id'";
pub const EX_HIBERNATE: &str = "Examples:
  sbx hibernate sbx-0123456789ab           # memory and files to disk; no memory or process held
  sbx ls                                   # STATE hibernated
  sbx resume sbx-0123456789ab              # back where it was, once its socket answers";
pub const EX_LS: &str = "Examples:\n  sbx ls
  sbx --json ls";
pub const EX_INSPECT: &str = "Examples:\n  sbx inspect sbx-0123456789ab";
pub const EX_EXEC: &str = "Examples:\n  sbx exec sbx-0123456789ab -- id
  sbx exec -i sbx-0123456789ab -- /bin/sh -c 'wc -l' < file
  sbx exec -d sbx-0123456789ab -- /bin/server --port 8000";
pub const EX_PS: &str = "Examples:\n  sbx ps sbx-0123456789ab";
pub const EX_KILL: &str = "Examples:\n  sbx kill sbx-0123456789ab p0123abcd
  sbx kill --signal KILL sbx-0123456789ab p0123abcd";
pub const EX_LOGS: &str = "Examples:\n  sbx logs sbx-0123456789ab
  sbx logs -f --tail 20 sbx-0123456789ab p0123abcd";
pub const EX_SHELL: &str = "Examples:\n  sbx shell sbx-0123456789ab";
pub const EX_CP: &str = "Examples:\n  sbx cp ./src sbx-0123456789ab:/tmp/src
  sbx cp sbx-0123456789ab:/state/workspace/out.txt .";
pub const EX_EVENTS: &str = "Examples:\n  sbx events                                  # every sandbox, until Ctrl-C
  sbx --json events --since 1h sbx-0123456789ab  # replay the last hour, then follow
  sbx events --since 2026-11-30T10:00:00Z --until 2026-11-30T11:00:00Z
  sbx --json events --until-event died sbx-0123456789ab   # wait for it to die (exit 0)
  sbx events --until +5m --until-event died sbx-0123456789ab  # ... for at most 5 minutes

Text: TIME  ID  EVENT  DETAIL (route=, exit_code=, oom_killed, session=).
--json: {\"time\",\"id\",\"event\"} plus exit_code, oom_killed, route, session when known.
Ctrl-C ends it with exit 0; an engine that goes away: exit 1.";
pub const EX_FILES: &str = "Examples:\n  sbx files sbx-0123456789ab /state/workspace
  sbx files -r --max-depth 3 sbx-0123456789ab /tmp
  sbx --json files sbx-0123456789ab /tmp | jq -r '.[].path'";
pub const EX_MKDIR: &str = "Examples:\n  sbx mkdir sbx-0123456789ab /tmp/out
  sbx mkdir -p sbx-0123456789ab /state/workspace/a/b";
pub const EX_WATCH: &str = "Examples:\n  sbx watch sbx-0123456789ab /tmp
  sbx watch -r sbx-0123456789ab /state/workspace
  sbx --json watch -r sbx-0123456789ab /tmp | jq -c 'select(.event == \"created\")'";
pub const EX_STATS: &str = "Examples:\n  sbx stats sbx-0123456789ab
  sbx stats --watch sbx-0123456789ab sbx-0123456789cd";
pub const EX_PORT_FORWARD: &str = "Examples:\n  sbx port-forward sbx-0123456789ab 8000
  sbx port-forward sbx-0123456789ab 9000:80 0:5432";
pub const EX_WAIT_PORT: &str = "Examples:\n  sbx wait-port sbx-0123456789ab 8000
  sbx wait-port --timeout 2m sbx-0123456789ab 8000";
pub const EX_BACKUP: &str = "Examples:\n  sbx backup sbx-0123456789ab > state.tar
  mkdir out && tar --no-same-owner --no-same-permissions -xf state.tar -C out   # outside sbx, as root

Modes are as `cp` writes them on the host: no setuid, setgid or group/other write.";
pub const EX_RESTORE: &str = "Examples:\n  sbx restore sbx-0123456789ab < state.tar";
pub const EX_AUDIT: &str = "Examples:\n  sbx audit sbx-0123456789ab
  sbx --json audit sbx-0123456789ab";
pub const EX_VOLUMES: &str = "Examples:\n  sbx volumes
  sbx --json volumes
  sbx volumes rm agent-7        # the session's volume, its directory and lock (refused while in use)";
pub const EX_TTL: &str = "Examples:\n  sbx ttl sbx-0123456789ab 30m";
pub const EX_GC: &str = "Examples:\n  sbx gc --dry-run
  sbx gc";
pub const EX_DOCTOR: &str = "Examples:\n  sbx doctor
  sbx doctor --route inference:proxy:8080
  sbx doctor --runtime runsc
  sbx --context far doctor    # where the engine is (remote: ssh://...) and what that changes";
pub const EX_ALLOW: &str = "Examples:\n  sbx allow sbx-0123456789ab registry.npmjs.org
  sbx allow sbx-0123456789ab '*.githubusercontent.com' git.example:8443";
pub const EX_DENY: &str = "Examples:\n  sbx deny sbx-0123456789ab github.com
  sbx deny sbx-0123456789ab git.example:8443";
pub const EX_SECRET: &str = "Examples:\n  sbx secret set sbx-0123456789ab OPENAI_API_KEY env:NEW_OPENAI_KEY
  sbx secret set sbx-0123456789ab GIT_TOKEN file:$HOME/.config/sbx/git-token";
pub const EX_EGRESS: &str = "Examples:\n  sbx egress log sbx-0123456789ab
  sbx egress log -f sbx-0123456789ab
  sbx --json egress log sbx-0123456789ab
  sbx egress policy sbx-0123456789ab";
pub const EX_POOL: &str =
    "Examples:\n  sbx pool create agents --size 20 --image \"$img\" --route inference:proxy:8080 --max-idle 1h
  id=$(sbx create --pool agents --session task-42 --ttl 30m)
  sbx pool ls
  sbx pool fill agents
  sbx pool rm agents";
pub const EX_POOL_CREATE: &str = "Examples:
  sbx pool create agents --size 20 --image \"$img\" --route inference:proxy:8080 --max-idle 1h
  sbx pool create untrusted --size 5 --image \"$img\" --runtime runsc --memory 512
  id=$(sbx create --pool agents --session task-42 --ttl 30m)    # the claim: a few ms, no docker call (one, remotely)";
pub const EX_POOL_LS: &str = "Examples:
  sbx pool ls
  sbx --json pool ls";
pub const EX_POOL_FILL: &str = "Examples:
  sbx pool fill agents
  */5 * * * * sbx pool fill agents    # crontab: top up and recycle even when no claim came";
pub const EX_POOL_RM: &str = "Examples:
  sbx pool rm agents
  sbx --json pool rm agents           # {\"pool\":\"agents\",\"removed\":[ids]}";
pub const EX_COMPLETIONS: &str =
    "Examples:\n  mkdir -p ~/.local/share/bash-completion/completions ~/.zfunc ~/.config/fish/completions
  sbx completions bash > ~/.local/share/bash-completion/completions/sbx    # loaded by bash-completion
  source <(sbx completions bash)               # in ~/.bashrc, without bash-completion
  sbx completions zsh > ~/.zfunc/_sbx          # with fpath+=(~/.zfunc) before compinit
  sbx completions fish > ~/.config/fish/completions/sbx.fish";
pub const EX_MAN: &str = "Examples:\n  sudo sbx man /usr/local/share/man/man1 && man sbx-create
  sbx man ~/.local/share/man/man1";

pub const EX_SERVE: &str = "Examples:
  sbx serve --template debian=sha256:<64 hex>    # E2B_API_URL=http://127.0.0.1:3000
  sbx serve --listen 127.0.0.1:8049 --api-key-file /etc/sbx/api-keys --template py=repo@sha256:<64 hex>
  sbx serve --listen unix:/run/sbx/serve.sock --template debian=sha256:<64 hex>
  sbx serve --listen 0.0.0.0:3000 --tls-cert cert.pem --tls-key key.pem --template debian=sha256:<64 hex>
  sbx serve --template debian=sha256:<64 hex> --memory 512 --cpus 1 --allow pypi.org --egress-network my-egress
  sbx serve --template debian=sha256:<64 hex> --allow-internet    # allow_internet_access: observe mode
  sbx pool create warm --size 4 --image repo@sha256:<64 hex> && sbx serve    # templateID warm claims";

pub const EX_MCP: &str = "Examples:
  sbx mcp --template debian=sha256:<64 hex>                  # an MCP client starts it; stdin/stdout are JSON-RPC
  sbx mcp --template py=repo@sha256:<64 hex> --ttl 30m       # each sandbox lives 30m at most
  claude mcp add sbx -- sbx mcp --template debian=sha256:<64 hex>    # Claude Code
  printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}' | sbx mcp    # the tools, by hand";
