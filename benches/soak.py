#!/usr/bin/env python3
"""Reliability soak for sbx on this machine's engine (not part of CI).

    python3 benches/soak.py                 # all phases, figures into BENCHMARKS.md
    python3 benches/soak.py --cycles 50     # fewer kill cycles
    python3 benches/soak.py --no-restart    # skip the engine restart phase

Phases:
  1. kill:     create/connect/destroy cycles; sbx is SIGKILLed at a random point
               in a third of the creates and a quarter of the destroys; `ls` is
               checked against the engine every 10 cycles; then `gc`.
  2. burst:    50 concurrent creates, then 50 concurrent destroys.
  3. restart:  dockerd is stopped and started while 4 workers create, connect
               and destroy; every sbx command must succeed or fail with an
               error that names the engine; then `gc`.
After each phase: no container, network, volume, socket directory or state
file of the soak's may be left. Runs as root (it restarts dockerd).
The sandbox image is examples/line-echo (pack.sh), as in the README.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SBX = os.path.join(ROOT, "target", "release", "sbx")
LABEL = "sbx-soak=1"
# Words an error must use to count as "names the engine" in phase 3.
ENGINE_WORDS = re.compile(r"docker|engine|daemon", re.I)


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


class Soak:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="sbx-soak-")
        self.sockets = os.path.join(self.tmp, "s")
        self.data = os.path.join(self.tmp, "d")
        os.makedirs(self.sockets)
        self.image = sh(["bash", os.path.join(ROOT, "examples/line-echo/pack.sh")], check=True).stdout.strip()
        self.figures = []

    def sbx(self, *args, timeout=180):
        cmd = [SBX, "--socket-dir", self.sockets, "--data-dir", self.data, *args]
        return sh(cmd, timeout=timeout)

    def spawn(self, *args):
        cmd = [SBX, "--socket-dir", self.sockets, "--data-dir", self.data, *args]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def create(self):
        return self.spawn("create", "--image", self.image, "--label", LABEL, "--socket-wait", "30s")

    def engine_ids(self):
        out = sh(["docker", "ps", "-a", "--filter", "label=" + LABEL, "--format", "{{.Names}}"])
        return set(out.stdout.split())

    def leftovers(self):
        left = {
            "containers": len(self.engine_ids()),
            "networks": len(sh(["docker", "network", "ls", "-q", "--filter", "label=sbx.private-for"]).stdout.split()),
            "volumes": len(sh(["docker", "volume", "ls", "-q", "--filter", "label=sbx.session"]).stdout.split()),
            "socket dirs": len(os.listdir(self.sockets)),
        }
        state = 0
        for kind in ("creating", "expires", "watchdog", "records"):
            d = os.path.join(self.data, kind)
            state += len(os.listdir(d)) if os.path.isdir(d) else 0
        left["state files"] = state
        return left

    def ls_truthful(self):
        out = self.sbx("--json", "ls")
        if out.returncode != 0:
            return False, out.stderr.strip()
        listed = {s["id"] for s in json.loads(out.stdout or "[]")}
        engine = self.engine_ids()
        # A create killed before `docker run` has no container: nothing to list.
        return listed == engine, f"listed {sorted(listed - engine)} not on engine, {sorted(engine - listed)} unlisted"

    def kill_phase(self, cycles):
        killed = created = connected = 0
        untruthful = []
        started = time.time()
        for i in range(cycles):
            p = self.create()
            if random.random() < 1 / 3:
                time.sleep(random.uniform(0, 0.4))
                p.send_signal(signal.SIGKILL)
                out, _ = p.communicate()
                killed += 1
                # The kill may land after create finished and printed its id:
                # then the sandbox is the caller's to destroy, as in a script.
                if p.returncode == 0 and out.strip():
                    self.sbx("destroy", out.strip())
                continue
            out, err = p.communicate()
            if p.returncode != 0:
                raise SystemExit(f"create failed in cycle {i}: {err}")
            sid = out.strip()
            created += 1
            c = subprocess.run(
                [SBX, "--socket-dir", self.sockets, "--data-dir", self.data, "connect", sid],
                input="ping\n", capture_output=True, text=True, timeout=30)
            connected += c.stdout == "echo: ping\n"
            if random.random() < 1 / 4:
                d = self.spawn("destroy", sid)
                time.sleep(random.uniform(0, 0.2))
                d.send_signal(signal.SIGKILL)
                d.wait()
                killed += 1
            self.sbx("destroy", sid)
            if i % 10 == 9:
                ok, why = self.ls_truthful()
                if not ok:
                    untruthful.append(why)
        gc = self.sbx("gc")
        # A killed `docker run` may finish after its sbx died: gc again once it has.
        time.sleep(2)
        gc2 = self.sbx("gc")
        self.figures.append(("kill", {
            "cycles": cycles, "sbx killed": killed, "created": created, "connected": connected,
            "ls untruthful": len(untruthful), "gc exit": f"{gc.returncode}/{gc2.returncode}",
            "seconds": round(time.time() - started, 1), **self.leftovers()}))
        for u in untruthful[:5]:
            print("ls untruthful:", u, file=sys.stderr)

    def burst_phase(self, n=50):
        started = time.time()
        ps = [self.create() for _ in range(n)]
        outs = [p.communicate() + (p.returncode,) for p in ps]
        ids = [o.strip() for o, _, rc in outs if rc == 0]
        fails = [e.strip() for _, e, rc in outs if rc != 0]
        created = time.time() - started
        ds = [self.spawn("destroy", i) for i in ids]
        dfails = [d.communicate()[1] for d in ds if d.wait() != 0]
        self.figures.append(("burst", {
            "creates": n, "ok": len(ids), "distinct ids": len(set(ids)), "create failures": len(fails),
            "destroy failures": len(dfails), "create wall s": round(created, 1),
            "total s": round(time.time() - started, 1), **self.leftovers()}))
        for f in (fails + dfails)[:5]:
            print("burst failure:", f, file=sys.stderr)

    def restart_phase(self, seconds=40):
        stop = threading.Event()
        results = {"ok": 0, "clear error": 0, "unclear error": []}
        lock = threading.Lock()

        def note(out):
            with lock:
                if out.returncode == 0:
                    results["ok"] += 1
                elif ENGINE_WORDS.search(out.stderr):
                    results["clear error"] += 1
                else:
                    results["unclear error"].append(out.stderr.strip()[:300])

        def worker():
            while not stop.is_set():
                c = self.sbx("create", "--image", self.image, "--label", LABEL, "--socket-wait", "20s")
                note(c)
                if c.returncode != 0:
                    time.sleep(0.5)
                    continue
                sid = c.stdout.strip()
                note(subprocess.run([SBX, "--socket-dir", self.sockets, "--data-dir", self.data, "connect", sid],
                                    input="ping\n", capture_output=True, text=True, timeout=60))
                note(self.sbx("destroy", sid))

        started = time.time()
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(seconds / 3)
        pid = int(sh(["pidof", "dockerd"]).stdout.split()[0])
        os.kill(pid, signal.SIGTERM)
        while os.path.exists(f"/proc/{pid}"):
            time.sleep(0.2)
        down_at = time.time()
        time.sleep(3)
        subprocess.Popen(["dockerd"], stdout=open(os.path.join(self.tmp, "dockerd.log"), "w"),
                         stderr=subprocess.STDOUT, start_new_session=True)
        while sh(["docker", "version"]).returncode != 0:
            time.sleep(0.5)
        down = time.time() - down_at
        time.sleep(seconds / 3)
        stop.set()
        for t in threads:
            t.join()
        gc = self.sbx("gc")
        ok, why = self.ls_truthful()
        # Sandboxes that survived (stopped by the restart) are still listed; destroy them.
        listed = json.loads(self.sbx("--json", "ls").stdout or "[]")
        if listed:
            self.sbx("destroy", *[s["id"] for s in listed])
        self.figures.append(("restart", {
            "commands ok": results["ok"], "clear engine errors": results["clear error"],
            "unclear errors": len(results["unclear error"]), "engine down s": round(down, 1),
            "gc exit": gc.returncode, "ls truthful after": ok, "survivors listed": len(listed),
            "seconds": round(time.time() - started, 1), **self.leftovers()}))
        for u in results["unclear error"][:5]:
            print("unclear error:", u, file=sys.stderr)
        if not ok:
            print("ls after restart:", why, file=sys.stderr)

    def report(self):
        lines = ["## Soak (benches/soak.py)", "",
                 f"Last run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
                 "every `left` figure must be 0.", ""]
        for name, figs in self.figures:
            lines.append(f"**{name}**: " + ", ".join(f"{k} {v}" for k, v in figs.items()))
            lines.append("")
        text = "\n".join(lines)
        print(text)
        path = os.path.join(ROOT, "BENCHMARKS.md")
        old = open(path).read() if os.path.exists(path) else ""
        old = re.sub(r"## Soak \(benches/soak.py\).*?(?=\n## |\Z)", "", old, flags=re.S).rstrip()
        open(path, "w").write(old + "\n\n" + text)

    def close(self):
        ids = self.engine_ids()
        if ids:
            sh(["docker", "rm", "-f", "-v", *ids])
        sh(["docker", "rmi", "-f", self.image])
        shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--no-restart", action="store_true")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    s = Soak()
    try:
        s.kill_phase(a.cycles)
        s.burst_phase(a.burst)
        if not a.no_restart:
            s.restart_phase()
        s.report()
    finally:
        s.close()
    bad = [n for n, f in s.figures if any(f.get(k) for k in
                                          ("containers", "networks", "volumes", "socket dirs", "state files"))]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
