"""The secrets tests' stand-in API: HTTPS on 443 with the test's own
certificate, in a container of the stock Debian image.

Every request it gets is one JSON line on stdout (the test reads `docker
logs`): the connection and its request number, the SNI, method, target,
every header as received, the body's length and sha256 (and the body itself
when small), and the status answered. It never answers with what it got,
except `/echo`, which reflects the request headers in its JSON body
(and Authorization in a response header too).

  /echo                       the request's method, target and headers, and
                              its Authorization in X-Echo-Authorization
  /v1/...                     a fixed JSON answer
  /org/repo.git/...           git smart HTTP (git http-backend) for a bare
                              repository made at start; Basic credentials
                              whose password is an accepted token, else 401
                              (none) or 403 (another)
  /simple/, /simple/sbxdemo/  a pip index of one tiny hand-made wheel, under
  /packages/...               the same check (Bearer or Basic)

Usage: python3 standin_api.py DIR (DIR holds cert.pem, key.pem and tokens,
the accepted tokens one a line, read anew for every request so a test can
rotate them).
"""

import base64
import hashlib
import http.server
import io
import itertools
import json
import os
import ssl
import subprocess
import sys
import threading
import urllib.parse
import zipfile

DIR = sys.argv[1]
GIT_ROOT = "/tmp/git"
REPO = "org/repo.git"
SMALL = 4096
WHEEL = "sbxdemo-0.1-py3-none-any.whl"

_out = threading.Lock()
_conns = itertools.count(1)


def log(record):
    line = json.dumps(record, sort_keys=True)
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def tokens():
    with open(os.path.join(DIR, "tokens"), encoding="utf-8") as f:
        return {t.strip() for t in f if t.strip()}


def make_repo():
    """A bare repository with one commit on main."""
    bare = os.path.join(GIT_ROOT, REPO)
    work = "/tmp/git-work"
    ident = ["-c", "user.name=standin", "-c", "user.email=standin@example", "-c", "init.defaultBranch=main"]

    def git(*args, cwd=None):
        subprocess.run(["git", *ident, *args], cwd=cwd, check=True, capture_output=True)

    git("init", "--bare", bare)
    git("config", "http.receivepack", "true", cwd=bare)
    git("init", work)
    with open(os.path.join(work, "README"), "w", encoding="utf-8") as f:
        f.write("hello from the stand-in's repository\n")
    git("add", "README", cwd=work)
    git("commit", "-m", "first", cwd=work)
    git("push", bare, "main", cwd=work)


def make_wheel():
    """A pure-Python wheel of one module, made by hand (no build tools)."""
    files = {
        "sbxdemo/__init__.py": b'VALUE = "sbxdemo from the stand-in"\n',
        "sbxdemo-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: sbxdemo\nVersion: 0.1\n",
        "sbxdemo-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: standin\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(data)}\n"
    record += "sbxdemo-0.1.dist-info/RECORD,,\n"
    files["sbxdemo-0.1.dist-info/RECORD"] = record.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


WHEEL_BYTES = b""


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "standin"
    sys_version = ""

    def setup(self):
        super().setup()
        self.conn = next(_conns)
        self.n = 0
        self.request.settimeout(30)
        try:
            self.request.do_handshake()
        except (OSError, ssl.SSLError) as e:
            log({"conn": self.conn, "tls_error": str(e)})
            raise

    def sni(self):
        return getattr(self.request, "sbx_sni", None)

    def log_message(self, *args):
        pass

    def send_error(self, code, message=None, explain=None):
        # A request too broken to parse: logged as received, answered
        # without echoing any of it.
        log({"conn": self.conn, "n": self.n, "sni": self.sni(), "bad": self.raw_requestline.decode("latin-1"), "status": code})
        self.close_connection = True
        self.answer(code, b'{"error":"bad request"}\n', "application/json")

    def handle_one_request(self):
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if not self.raw_requestline:
                self.close_connection = True
                return
            self.n += 1
            if len(self.raw_requestline) > 65536:
                self.send_error(414)
                return
            if not self.parse_request():
                return
            self.serve()
            self.wfile.flush()
        except (TimeoutError, ConnectionError, ssl.SSLError, ValueError) as e:
            log({"conn": self.conn, "n": self.n, "error": str(e)})
            self.close_connection = True

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline(65537).split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def answer(self, code, body, ctype, extra=()):
        self.send_response_only(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def authorized(self, basic_only):
        """None when an accepted token came (Bearer, or Basic's password), else the refusal's status."""
        auth = self.headers.get("Authorization")
        if not auth:
            return 401
        scheme, _, cred = auth.partition(" ")
        if scheme.lower() == "bearer" and not basic_only:
            given = cred.strip()
        elif scheme.lower() == "basic":
            try:
                given = base64.b64decode(cred.strip(), validate=True).decode().partition(":")[2]
            except (ValueError, UnicodeDecodeError):
                return 403
        else:
            return 403
        return None if given in tokens() else 403

    def serve(self):
        body = self.read_body()
        target = urllib.parse.urlsplit(self.path)
        path = target.path
        if path == "/echo":
            seen = {"method": self.command, "target": self.path, "headers": [[k, v] for k, v in self.headers.items()]}
            reflected = [("X-Echo-Authorization", v) for v in self.headers.get_all("Authorization", [])]
            out = (200, json.dumps(seen).encode() + b"\n", "application/json", reflected)
        elif path.startswith("/v1/"):
            out = (200, b'{"object":"standin","ok":true}\n', "application/json", ())
        elif path.startswith("/" + REPO + "/"):
            refused = self.authorized(basic_only=True)
            out = self.refusal(refused) if refused else self.git(target, body)
        elif path in ("/simple/", "/simple/sbxdemo/", "/packages/" + WHEEL):
            refused = self.authorized(basic_only=False)
            out = self.refusal(refused) if refused else self.index(path)
        else:
            out = (404, b'{"error":"not found"}\n', "application/json", ())
        record = {
            "conn": self.conn,
            "n": self.n,
            "sni": self.sni(),
            "method": self.command,
            "target": self.path,
            "path": path,
            "version": self.request_version,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_len": len(body),
            "body_sha256": hashlib.sha256(body).hexdigest(),
            "status": out[0],
        }
        if len(body) <= SMALL:
            record["body"] = body.decode("latin-1")
        log(record)
        self.answer(*out)

    def refusal(self, code):
        extra = [("WWW-Authenticate", 'Basic realm="standin"')] if code == 401 else []
        return (code, b'{"error":"unauthorized"}\n', "application/json", extra)

    def index(self, path):
        if path == "/packages/" + WHEEL:
            return (200, WHEEL_BYTES, "application/octet-stream", ())
        if path == "/simple/":
            page = '<html><body><a href="/simple/sbxdemo/">sbxdemo</a></body></html>\n'
        else:
            digest = hashlib.sha256(WHEEL_BYTES).hexdigest()
            page = f'<html><body><a href="/packages/{WHEEL}#sha256={digest}">{WHEEL}</a></body></html>\n'
        return (200, page.encode(), "text/html", ())

    def git(self, target, body):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": GIT_ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": target.path,
            "QUERY_STRING": target.query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "standin",
            "REMOTE_ADDR": self.client_address[0],
        }
        for header, var in (("Content-Encoding", "HTTP_CONTENT_ENCODING"), ("Git-Protocol", "GIT_PROTOCOL")):
            if self.headers.get(header):
                env[var] = self.headers[header]
        done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60)
        head, sep, rest = done.stdout.partition(b"\r\n\r\n")
        if not sep:
            head, sep, rest = done.stdout.partition(b"\n\n")
        status, ctype, extra = 200, "application/octet-stream", []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k.lower() == "content-type":
                ctype = v
            elif k.lower() not in ("content-length", "connection", "transfer-encoding"):
                extra.append((k, v))
        if done.returncode != 0 and not sep:
            return (500, b'{"error":"git"}\n', "application/json", ())
        return (status, rest, ctype, extra)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        sys.stderr.write(f"stand-in: connection from {client_address} ended: {sys.exc_info()[1]!r}\n")


def main():
    global WHEEL_BYTES
    make_repo()
    WHEEL_BYTES = make_wheel()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(DIR, "cert.pem"), os.path.join(DIR, "key.pem"))
    ctx.set_alpn_protocols(["http/1.1"])

    def remember_sni(sock, name, _ctx):
        sock.sbx_sni = name

    ctx.sni_callback = remember_sni
    srv = Server(("0.0.0.0", 443), Handler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    log({"ready": True})
    srv.serve_forever()


main()
