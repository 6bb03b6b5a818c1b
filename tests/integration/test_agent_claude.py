"""The Claude agent for real: the OAuth refresh against a local token endpoint (through
agent-probe, which runs the agent's prepare() as the daemon's thread pool does),
`uplink rules check claude anthropic ...` against a real uplinkd with a fixture HOME,
entrypoint.sh run on the host with stub system commands, and the Dockerfile's static
properties.

`docker build` of agents/claude/Dockerfile cannot run here (the build needs the network
for apt and npm), so the image itself is checked by reading the Dockerfile only.
"""
import json
import os
import shutil
import signal
import subprocess
import time
import tempfile
from pathlib import Path

import pytest

from uplinktest import ROOT, Daemon, Lines, TokenServer, build_dir, wait_for

FIXTURES = ROOT / "tests" / "data" / "agents" / "claude"
CONTEXT = ROOT / "agents" / "claude"
AGENTS = ROOT / "agents"  # every agent image's build context
COMMON = AGENTS / "common"  # the one entrypoint, the git configuration
SENTINEL = "uplink-sentinel"
NOW = 1700000000


def probe_bin():
    return str(build_dir() / "tests" / "integration" / "agent-probe")


def probe(home, *args, env=None, extra=()):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([probe_bin(), "--home", str(home), *args, "--", *extra],
                       capture_output=True, text=True, timeout=60, env=e)
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout), r.stderr


@pytest.fixture
def home():
    """A private copy of a fixture home: prepare() writes refreshed tokens and folders there."""
    d = Path(tempfile.mkdtemp(prefix="upa-", dir="/tmp"))

    def make(fixture):
        shutil.copytree(FIXTURES / fixture, d / fixture, symlinks=True)
        return d / fixture
    yield make
    shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- OAuth refresh

@pytest.fixture
def token_server():
    s = TokenServer()
    yield s
    s.close()


NEW = {"access_token": "sk-ant-oat01-uplink-sentinel-new", "refresh_token":
       "sk-ant-ort01-uplink-sentinel-newrefresh", "expires_in": 28800, "token_type": "Bearer",
       "scope": "user:inference"}


def test_refresh_expired_token(home, token_server):
    h = home("expired")
    state = h / "state"
    state.mkdir()
    token_server.body = NEW
    rc, out, err = probe(h, "--state", str(state), "--now", str(NOW),
                         env={"UPLINK_ANTHROPIC_TOKEN_URL": token_server.url})
    assert rc == 0, out
    # one refresh grant with the old refresh token and Claude Code's client id
    assert len(token_server.requests) == 1
    path, headers, body = token_server.requests[0]
    assert path == "/v1/oauth/token" and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"grant_type": "refresh_token", "client_id":
                                "9d1c250a-e61b-44d9-88ed-5944d1962f5e", "refresh_token":
                                "sk-ant-ort01-uplink-sentinel-oldrefresh"}
    # the mitm injects the new token; it expires when the endpoint said
    rules = json.loads(out["auth_rules"])["rules"]
    # explicit methods, never TRACE (its answer would echo the token)
    assert rules == [{"name": "anthropic-auth", "hosts": [r"api\.anthropic\.com"],
                      "methods": ["GET", "HEAD", "POST", "DELETE"],
                      "inject": {"headers": {"Authorization": "Bearer " + NEW["access_token"]}}}]
    assert out["expires_at"] == NOW + 28800
    # the host file has the new tokens (the old refresh token is spent), still 0600
    creds = h / ".claude" / ".credentials.json"
    saved = json.loads(creds.read_text())["claudeAiOauth"]
    assert saved["accessToken"] == NEW["access_token"]
    assert saved["refreshToken"] == NEW["refresh_token"]
    assert saved["expiresAt"] == (NOW + 28800) * 1000
    assert saved["scopes"] == ["user:inference"] and saved["subscriptionType"] == "pro"
    assert creds.stat().st_mode & 0o777 == 0o600
    # nothing the pod gets holds a real token
    pod = json.dumps([out["env"], out["volumes"], out["command"], out["warnings"]])
    assert SENTINEL not in pod
    fake = next(v for v in out["volumes"] if v["name"] == "claude-fake-creds")
    fake_oauth = json.loads(fake["files"][0]["data"])["claudeAiOauth"]
    assert fake_oauth["accessToken"].startswith("sk-ant-oat01-agent-uplink-")
    assert fake_oauth["subscriptionType"] == "pro"


def test_no_refresh_when_fresh(home, token_server):
    h = home("valid")
    rc, out, _ = probe(h, "--rules-only", "--now", str(NOW),
                       env={"UPLINK_ANTHROPIC_TOKEN_URL": token_server.url})
    assert rc == 0 and token_server.requests == []
    assert out["expires_at"] == 4102444800


def test_refresh_over_https_trusts_uplink_ca_bundle(home, tmp_path):
    """A token endpoint under a CA the system does not know (a corporate proxy's): refused
    by default, renewed with UPLINK_CA_BUNDLE naming that CA."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent / "addon"))
    from addon_support import CA
    ca = CA("uplink test corporate CA")
    (tmp_path / "ca.pem").write_bytes(ca.pem)
    (tmp_path / "server.pem").write_bytes(ca.issue("127.0.0.1", ips=["127.0.0.1"]))
    server = TokenServer(tls=str(tmp_path / "server.pem"))
    server.body = NEW
    try:
        h = home("expired")
        env = {"UPLINK_ANTHROPIC_TOKEN_URL": server.url}
        rc, out, err = probe(h, "--rules-only", "--now", str(NOW), env=env)
        assert rc == 1 and "certificate" in out["error"], out
        assert server.requests == []
        env["UPLINK_CA_BUNDLE"] = str(tmp_path / "ca.pem")
        rc, out, err = probe(h, "--rules-only", "--now", str(NOW), env=env)
        assert rc == 0, (out, err)
        assert len(server.requests) == 1 and out["expires_at"] == NOW + 28800
        saved = json.loads((h / ".claude" / ".credentials.json").read_text())["claudeAiOauth"]
        assert saved["accessToken"] == NEW["access_token"]
    finally:
        server.close()


def test_refresh_refused(home, token_server):
    h = home("expired")
    before = (h / ".claude" / ".credentials.json").read_bytes()
    token_server.status = 400
    token_server.body = {"error": "invalid_grant",
                         "error_description": "refresh token uplink-sentinel-x is revoked"}
    rc, out, err = probe(h, "--rules-only", "--now", str(NOW),
                         env={"UPLINK_ANTHROPIC_TOKEN_URL": token_server.url})
    assert rc == 1
    assert out["error"] == (
        "the Claude OAuth token in ~/.claude/.credentials.json has expired and refreshing it "
        f"failed ({token_server.url} answered HTTP 400, invalid_grant): log in again by running "
        "`claude` on this machine, or use --bedrock")
    assert SENTINEL not in out["error"] + err
    assert (h / ".claude" / ".credentials.json").read_bytes() == before


def test_refresh_fails_before_expiry_warns(home, token_server):
    h = home("expired")
    creds = h / ".claude" / ".credentials.json"
    doc = json.loads(creds.read_text())
    doc["claudeAiOauth"]["expiresAt"] = (NOW + 100) * 1000  # inside the 300 s margin
    creds.write_text(json.dumps(doc))
    token_server.status = 500
    token_server.body = b"oops uplink-sentinel"
    rc, out, _ = probe(h, "--rules-only", "--now", str(NOW),
                       env={"UPLINK_ANTHROPIC_TOKEN_URL": token_server.url})
    assert rc == 0, out
    assert len(token_server.requests) == 1
    assert "sk-ant-oat01-uplink-sentinel-old" in out["auth_rules"]
    assert out["expires_at"] == NOW + 100
    assert out["warnings"] == [
        f"refreshing the Claude OAuth token failed ({token_server.url} answered HTTP 500); the "
        "current token works for 100 more seconds: run `claude` on this machine to renew it"]


def test_refresh_answer_bounded(home, token_server):
    h = home("expired")
    token_server.body = {"access_token": "x" * (70 * 1024), "expires_in": 1}
    rc, out, _ = probe(h, "--rules-only", "--now", str(NOW),
                       env={"UPLINK_ANTHROPIC_TOKEN_URL": token_server.url})
    assert rc == 1
    assert f"the answer of {token_server.url} is larger than 65536 bytes" in out["error"]


# ---------------------------------------------------------------- rules check

@pytest.fixture
def daemon_home(home):
    """uplinkd whose HOME is a copy of a fixture home."""
    started = []

    def start(fixture):
        h = home(fixture)
        tmp = Path(tempfile.mkdtemp(prefix="upd-", dir="/tmp"))
        d = Daemon(tmp, env={"HOME": str(h), "UPLINK_DATA_DIR": str(ROOT)}).start()
        started.append((d, tmp))
        return d
    yield start
    for d, tmp in started:
        rc = d.stop()
        logs = d.logs()
        d.close()
        shutil.rmtree(tmp, ignore_errors=True)
        assert rc == 0, logs
        assert SENTINEL not in logs


def test_rules_check_anthropic(daemon_home):
    d = daemon_home("valid")
    r = d.client("rules", "check", "claude", "anthropic", "POST",
                 "https://api.anthropic.com/v1/messages")
    assert r.returncode == 0, r.stderr
    assert "rule:   anthropic-auth" in r.stdout and "layer:  auth" in r.stdout
    assert "inject: Authorization" in r.stdout
    assert SENTINEL not in r.stdout + r.stderr
    r = d.client("rules", "check", "--json", "claude", "POST",
                 "https://api.anthropic.com/v1/messages")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["decision"] == "allow"
    assert out["rule"]["name"] == "anthropic-auth" and out["rule"]["layer"] == "auth"
    assert out["rule"]["headers"] == ["Authorization"]
    assert out["rule"]["source"] == "agent:claude:auth:1"
    # the agent's defaults come from agents/claude/default-rules.yaml
    r = d.client("rules", "check", "--json", "claude", "anthropic", "POST",
                 "https://http-intake.logs.datadoghq.com/api/v2/logs")
    out = json.loads(r.stdout)
    assert out["rule"]["name"] == "claude-logs" and out["rule"]["layer"] == "agent"
    assert out["rule"]["source"] == "agents/claude/default-rules.yaml:3"
    # render shows the value only when asked
    r = d.client("rules", "render", "claude", "anthropic")
    assert r.returncode == 0 and SENTINEL not in r.stdout


def test_rules_check_without_credentials(daemon_home):
    d = daemon_home("no-credentials")
    r = d.client("rules", "check", "claude", "anthropic", "POST",
                 "https://api.anthropic.com/v1/messages")
    assert r.returncode == 2
    assert r.stderr == ("uplink: ~/.claude/.credentials.json not found: run `claude` once on "
                        "this machine and log in, or use --bedrock\n")
    r = d.client("rules", "check", "claude", "vertex", "GET", "https://x/")
    assert r.returncode == 2
    assert "agent claude has no mode 'vertex'; known: claude (modes anthropic, bedrock)" in r.stderr


# ---------------------------------------------------------------- entrypoint.sh

STUB = r"""#!/bin/sh
{ printf '%s' "${0##*/}"; for a; do printf ' [%s]' "$a"; done; printf '\036'; } >>"$STUB_LOG"
"""

STUBS = {
    "update-ca-certificates": STUB + r"""
[ -f "$UPLINK_ROOT/usr/local/share/ca-certificates/uplink-session-ca.crt" ] || exit 3
""",
    "getent": STUB + r"""
[ "$1 $2" = "group docker" ] && { echo "docker:x:998:"; exit 0; }
exit 2
""",
    "groupadd": STUB, "useradd": STUB, "usermod": STUB, "chown": STUB, "chgrp": STUB,
    "dockerd": STUB + r"""
for a; do case $a in --host=unix://*) sock=${a#--host=unix://} ;; esac; done
exec python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$sock"
""",
    # runuser: log, become "the user" as far as HOME goes, run the command
    "runuser": STUB + r"""
while [ "$1" != "--" ]; do shift; done
shift
export HOME="$UPLINK_HOME"
exec "$@"
""",
    # tmux: new-session runs its command at once, in its -c folder; no session outlives it
    "tmux": STUB + r"""
[ "$1" = -S ] && shift 2
cmd=$1
shift
case $cmd in
new-session)
	while [ $# -gt 0 ]; do
		case $1 in
		-c) dir=$2; shift 2 ;;
		-s | -x | -y) shift 2 ;;
		-d) shift ;;
		*) break ;;
		esac
	done
	(cd "$dir" && "$@")
	exit 0 ;;
has-session) exit 1 ;;
capture-pane) printf '%b' "${STUB_SCREEN:-}"; exit 0 ;;
esac
exit 0
""",
    # the agent: where it runs, as whom, with which arguments (NUL-separated)
    "claude": r"""#!/bin/sh
pwd >"$STUB_OUT/cwd"
printf '%s\0' "$@" >"$STUB_OUT/argv"
printf '%s' "$HOME" >"$STUB_OUT/home"
exit "${CLAUDE_EXIT:-0}"
""",
}


@pytest.fixture
def entry(tmp_path):
    """A temp root, stub commands first on PATH, a home and a working directory."""
    stubs, out = tmp_path / "stubs", tmp_path / "out"
    root, homedir, work = tmp_path / "root", tmp_path / "home" / "alice", tmp_path / "work dir"
    for d in (stubs, out, root, homedir, work):
        d.mkdir(parents=True)
    for name, text in STUBS.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    # bash -l resets PATH from /etc/profile; the user's profile brings the stubs back
    (homedir / ".bash_profile").write_text(f'PATH="{stubs}:$PATH"\n')
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "STUB_LOG": str(out / "log"),
           "STUB_OUT": str(out), "UPLINK_ROOT": str(root), "UPLINK_UID": "4243",
           "UPLINK_GID": "4242", "USERNAME": "alice", "UPLINK_HOME": str(homedir),
           "WORKDIR": str(work), "UPLINK_CA_CERT": str(ca), "UPLINK_DOCKERD_WAIT": "5",
           "UPLINK_AGENT_DIRS": ".claude", "LANG": "C", "UPLINK_ATTACH_LINGER": "0"}

    class Entry:
        pass
    e = Entry()
    e.env, e.out, e.root, e.home, e.work, e.ca = env, out, root, homedir, work, ca

    def run(*args, extra_env=None, timeout=60):
        env2 = dict(env)
        env2.update(extra_env or {})
        return subprocess.run([str(COMMON / "entrypoint.sh"), *args], env=env2,
                              capture_output=True, text=True, timeout=timeout)
    e.run = run
    # one record per call, ended by RS: arguments may hold line breaks
    e.log = lambda: (out / "log").read_text().split("\036")[:-1] if (out / "log").exists() else []
    return e


NASTY = ["-p", "explain this; rm -rf / && echo $HOME", "it's \"quoted\"", "$(touch /tmp/pwned)",
         "`id`", "two\nlines", "", "*", "\\"]


def test_entrypoint_runs_the_agent(entry, home):
    # the command exactly as the agent's prepare() makes it for these passthrough args
    h = home("valid")
    rc, out, err = probe(h, "--now", str(NOW), extra=NASTY)
    assert rc == 0, out
    assert out["entrypoint"] == ["/usr/local/bin/uplink-entrypoint"]
    command = out["command"]
    assert command[:2] == ["bash", "-lc"]

    r = entry.run(*command, extra_env={"CLAUDE_EXIT": "42"})
    assert r.returncode == 42, r.stderr
    assert "uplink-entrypoint: the agent exited with code 42" in r.stderr
    # every argument arrived as itself, in the working directory, as the user's home
    argv = (entry.out / "argv").read_text().split("\0")[:-1]
    assert argv == ["--allow-dangerously-skip-permissions"] + NASTY
    assert (entry.out / "cwd").read_text().strip() == str(entry.work)
    assert (entry.out / "home").read_text() == str(entry.home)
    assert not Path("/tmp/pwned").exists()

    log = entry.log()
    names = [line.split(" ", 1)[0] for line in log]
    # the CA is trusted before anything else, the user exists before dockerd and tmux
    order = ["update-ca-certificates", "getent", "getent", "groupadd", "getent", "getent",
             "useradd", "getent", "usermod", "chown", "chown", "dockerd", "chgrp", "chown",
             "runuser", "tmux", "tmux", "runuser", "tmux"]
    assert names == order, log
    assert log[1:3] == ["getent [group] [4242]", "getent [group] [alice]"]
    assert log[3] == "groupadd [-g] [4242] [alice]"
    assert log[6] == (f"useradd [-M] [-N] [-u] [4243] [-g] [4242] [-d] [{entry.home}] [-s] "
                      "[/bin/bash] [alice]")
    assert log[8] == "usermod [-aG] [docker] [alice]"
    assert log[9] == f"chown [4243:4242] [{entry.home}]"
    assert log[10] == f"chown [4243:4242] [{entry.home}/.claude]"
    assert log[11].startswith(f"dockerd [--host=unix://{entry.root}/var/run/docker.sock] ")
    sock = entry.root / "run" / "uplink" / "tmux.sock"
    assert log[14] == "runuser [-u] [alice] [--] [tmux] [-S] [%s] [new-session] [-d] [-s] [uplink] " \
        "[-x] [200] [-y] [50] [-c] [%s] [%s] [--run] [bash] [-lc] [%s]" % (
            sock, entry.work, COMMON / "entrypoint.sh", command[2])
    # the agent ended: its pane, history and all, kept for --attach to print
    assert log[16] == f"tmux [-S] [{sock}] [capture-pane] [-p] [-J] [-S] [-] [-t] [uplink]"
    assert log[18] == f"tmux [-S] [{sock}] [has-session] [-t] [uplink]"
    # the session CA went into the system store
    assert (entry.root / "usr/local/share/ca-certificates/uplink-session-ca.crt").read_text() == \
        entry.ca.read_text()
    assert (entry.root / "run" / "uplink" / "agent.exit").read_text() == "42\n"


def test_entrypoint_exit_zero_and_existing_user(entry):
    # uid 4243 already exists in the image (as node's user does): it is renamed
    getent = STUB + r"""
[ "$1 $2" = "passwd 4243" ] && { echo "node:x:4243:4242::/home/node:/bin/sh"; exit 0; }
[ "$1 $2" = "group 4242" ] && { echo "node:x:4242:"; exit 0; }
exit 2
"""
    stub = Path(entry.env["PATH"].split(":")[0]) / "getent"
    stub.write_text(getent)
    r = entry.run("claude", "--version")
    assert r.returncode == 0, r.stderr
    log = entry.log()
    assert "usermod [-l] [alice] [node]" in log
    assert f"usermod [-d] [{entry.home}] [-g] [4242] [-s] [/bin/bash] [alice]" in log
    assert not any(line.startswith(("useradd", "groupadd")) for line in log)
    assert (entry.out / "argv").read_text() == "--version\0"


def test_entrypoint_refuses_missing_env(entry):
    r = entry.run("claude", extra_env={"UPLINK_UID": ""})
    assert r.returncode == 125
    assert r.stderr == "uplink-entrypoint: $UPLINK_UID is not set (uplinkd sets it in the pod spec)\n"
    r = entry.run("claude", extra_env={"USERNAME": "a;b"})
    assert r.returncode == 125 and "USERNAME 'a;b' is not a user name" in r.stderr
    assert entry.log() == []


def test_entrypoint_without_dockerd(entry):
    stub = Path(entry.env["PATH"].split(":")[0]) / "dockerd"
    stub.write_text(STUB)  # never makes its socket
    r = entry.run("claude", extra_env={"UPLINK_DOCKERD_WAIT": "1"}, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "dockerd did not start within 1s" in r.stderr


def session_tmux(entry):
    """A tmux stub whose session exists once STUB_OUT/session does."""
    stub = Path(entry.env["PATH"].split(":")[0]) / "tmux"
    stub.write_text(STUB + r"""
[ "$1" = -S ] && shift 2
case $1 in has-session) [ -e "$STUB_OUT/session" ]; exit ;; esac
exit 0
""")
    return entry.out / "session"


def test_ended_agent_waits_for_its_first_client(entry):
    """`claude -p` may end before uplink run's kubectl exec attaches: --run keeps the last
    screen (the tmux pane) until a client attached, UPLINK_ATTACH_LINGER seconds at most,
    and gives the exit code to PID 1 only then."""
    state = entry.root / "run" / "uplink"
    state.mkdir(parents=True)
    exit_file, attached = state / "agent.exit", state / "attached"
    p = subprocess.Popen([str(COMMON / "entrypoint.sh"), "--run", "sh", "-c", "exit 7"],
                         env={**entry.env, "UPLINK_ATTACH_LINGER": "60"},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.5)
        assert p.poll() is None and not exit_file.exists()  # waiting for a client
        # the client attaches (what --attach does first): the pane goes a moment later
        session_tmux(entry).write_text("")
        r = entry.run("--attach")
        assert attached.exists(), r.stderr
        assert p.wait(timeout=30) == 7
        assert exit_file.read_text() == "7\n"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # with a client attached before the end, and with no one to wait for: no wait
    p = subprocess.Popen([str(COMMON / "entrypoint.sh"), "--run", "sh", "-c", "exit 3"],
                         env={**entry.env, "UPLINK_ATTACH_LINGER": "60"})
    assert p.wait(timeout=10) == 3
    attached.unlink()
    p = subprocess.Popen([str(COMMON / "entrypoint.sh"), "--run", "true"],
                         env={**entry.env, "UPLINK_ATTACH_LINGER": "1"})
    assert p.wait(timeout=10) == 0 and not attached.exists()


def test_entrypoint_attach(entry):
    session_tmux(entry).write_text("")
    r = entry.run("--attach")
    assert r.returncode == 0, r.stderr
    sock = entry.root / "run" / "uplink" / "tmux.sock"
    attach = [c for c in entry.log() if "attach-session" in c]
    assert attach == [
        f"runuser [-u] [alice] [--] [tmux] [-S] [{sock}] [attach-session] [-t] [uplink]",
        f"tmux [-S] [{sock}] [attach-session] [-t] [uplink]"]


def test_entrypoint_attach_waits_for_the_session(entry):
    """kubectl exec comes as soon as the container runs, before PID 1 made the tmux session:
    --attach waits for it rather than failing on a missing socket."""
    flag = session_tmux(entry)
    p = subprocess.Popen([str(COMMON / "entrypoint.sh"), "--attach"], env=entry.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "waiting for the agent to start" in Lines(p, p.stderr).next("the wait to be said")
    assert not any("attach-session" in c for c in entry.log())
    flag.write_text("")
    assert p.wait(timeout=30) == 0
    assert any("attach-session" in c for c in entry.log())


def test_entrypoint_attach_says_the_agent_ended(entry):
    """tmux returns on a detach and when the agent ends: 86 tells uplink it was the latter,
    and what the agent left on its screen is printed after tmux, where it stays."""
    flag = session_tmux(entry)
    flag.write_text("")
    stub = Path(entry.env["PATH"].split(":")[0]) / "tmux"
    stub.write_text(stub.read_text().replace("exit 0\n", 'rm -f "$STUB_OUT/session"; exit 0\n'))
    r = entry.run("--attach")
    assert r.returncode == 86, r.stderr
    assert r.stdout == ""  # nothing kept: nothing printed
    flag.write_text("")
    (entry.root / "run" / "uplink").mkdir(parents=True, exist_ok=True)
    (entry.root / "run" / "uplink" / "agent.screen").write_text("$ claude -p\nthe answer\n")
    r = entry.run("--attach")
    assert r.returncode == 86, r.stderr
    assert r.stdout == "$ claude -p\nthe answer\n"
    # read as the user, and as plain text: what is not text never reaches the terminal
    assert any(c.startswith("runuser [-u] [alice] [--] [cat]") for c in entry.log())
    flag.write_text("")
    (entry.root / "run" / "uplink" / "agent.screen").write_text(
        "the answer\x1b]52;c;cHduZWQ=\x07 in\tplain\r\n")
    r = entry.run("--attach")
    assert r.returncode == 86, r.stderr
    assert r.stdout == "the answer]52;c;cHduZWQ= in\tplain\n"


def test_detach_prints_no_screen(entry):
    """A detach leaves the session running: nothing of its screen is printed."""
    session_tmux(entry).write_text("")
    (entry.root / "run" / "uplink").mkdir(parents=True, exist_ok=True)
    (entry.root / "run" / "uplink" / "agent.screen").write_text("an older screen\n")
    r = entry.run("--attach")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""


def test_ended_agent_keeps_its_screen_without_blank_rows(entry):
    """--run keeps the pane as text when the agent ends: the blank rows below the last line
    go, blank lines between lines stay."""
    state = entry.root / "run" / "uplink"
    state.mkdir(parents=True)
    env = {**entry.env, "STUB_SCREEN": "line one\\n\\n  indented\\n   \\n\\n\\n"}
    p = subprocess.run([str(COMMON / "entrypoint.sh"), "--run", "sh", "-c", "exit 4"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 4, p.stderr
    assert (state / "agent.screen").read_text() == "line one\n\n  indented\n"
    assert (state / "agent.exit").read_text() == "4\n"


def test_entrypoint_attach_gives_up(entry):
    session_tmux(entry)
    r = entry.run("--attach", extra_env={"UPLINK_ATTACH_WAIT": "1"})
    assert r.returncode == 125
    assert "the agent's tmux session did not start within 1s" in r.stderr
    assert not any("attach-session" in c for c in entry.log())


def test_entrypoint_sigterm(entry):
    """SIGTERM while the agent runs: tmux is killed and the script exits 143."""
    tmux = STUB + r"""
[ "$1" = -S ] && shift 2
case $1 in has-session) exit 0 ;; esac
exit 0
"""
    stub = Path(entry.env["PATH"].split(":")[0]) / "tmux"
    stub.write_text(tmux)
    env = dict(entry.env)
    p = subprocess.Popen([str(COMMON / "entrypoint.sh"), "claude"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the script is in its wait loop (its trap set) once it asks tmux whether the session lives
    wait_for(lambda: any("has-session" in l for l in entry.log()), what="the entrypoint's wait loop")
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 143
    assert any("kill-server" in l for l in entry.log())


# ---------------------------------------------------------------- Dockerfile

def dockerfile():
    lines, cur = [], ""
    for raw in (CONTEXT / "Dockerfile").read_text().splitlines():
        if raw.lstrip().startswith("#") and not cur:
            continue
        if raw.endswith("\\"):
            cur += raw[:-1] + " "
            continue
        cur += raw
        if cur.strip():
            lines.append(cur.strip())
        cur = ""
    return [(l.split(None, 1)[0].upper(), l.split(None, 1)[1] if " " in l else "") for l in lines]


def test_dockerfile_static():
    ins = dockerfile()
    kinds = [k for k, _ in ins]
    assert kinds[0] == "FROM" and ins[0][1].startswith("node:")
    runs = " ".join(a for k, a in ins if k == "RUN")
    # the tools come from common/base.sh, the same layers for every agent, before the CLI
    base = (AGENTS / "common" / "base.sh").read_text()
    words = " ".join(base.replace("\\\n", " ").split())
    for pkg in ("tmux", "git", "docker.io", "ca-certificates", "iptables", "util-linux", "passwd"):
        assert f" {pkg} " in f" {words} ", pkg
    assert "if command -v sudo >/dev/null; then" in base and "exit 1" in base
    assert runs.startswith("sh /usr/local/lib/uplink/base.sh")
    assert "npm install -g \"@anthropic-ai/claude-code@" in runs
    assert " sudo " not in f" {runs} "
    # CACHE_BUST comes before the Claude Code install, so bumping it reinstalls the CLI
    bust = next(i for i, (k, a) in enumerate(ins) if k == "ARG" and a.startswith("CACHE_BUST"))
    npm = next(i for i, (k, a) in enumerate(ins) if k == "RUN" and "claude-code" in a)
    assert bust < npm
    copies = [a.split() for k, a in ins if k in ("COPY", "ADD")]
    assert ["common/entrypoint.sh", "/usr/local/bin/uplink-entrypoint"] in copies
    assert ["common/gitconfig", "/etc/gitconfig"] in copies
    assert ["common/base.sh", "/usr/local/lib/uplink/base.sh"] in copies
    for src, _ in copies:  # only from common/ and its own folder; no CA, no key
        assert src.split("/")[0] in ("common", "claude"), src
        assert (AGENTS / src).is_file(), src
        assert not src.endswith((".crt", ".pem", ".key"))
    assert not any(k == "ADD" for k in kinds)
    assert ("ENTRYPOINT", '["/usr/local/bin/uplink-entrypoint"]') in ins
    assert not any(k == "USER" for k in kinds)  # PID 1 is root; the agent runs as the user
    env = " ".join(a for k, a in ins if k == "ENV")
    assert "DISABLE_AUTOUPDATER=1" in env
    assert os.access(COMMON / "entrypoint.sh", os.X_OK)


def test_entrypoint_is_posix_sh():
    assert (COMMON / "entrypoint.sh").read_text().startswith("#!/bin/sh\n")
    subprocess.run(["sh", "-n", str(COMMON / "entrypoint.sh")], check=True)
    if shutil.which("dash"):
        subprocess.run(["dash", "-n", str(COMMON / "entrypoint.sh")], check=True)
    if shutil.which("shellcheck"):
        r = subprocess.run(["shellcheck", "-s", "sh", "-S", "warning",
                            str(COMMON / "entrypoint.sh")], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout


def test_default_rules_and_gitconfig():
    rules = (CONTEXT / "default-rules.yaml").read_text()
    assert "name: claude-logs" in rules
    git = (COMMON / "gitconfig").read_text()
    for host in ("github.com", "gitlab.com", "bitbucket.org"):
        assert f'[url "https://{host}/"]\n\tinsteadOf = git@{host}:\n\tinsteadOf = ssh://git@{host}/\n' in git
    assert "path = /etc/gitconfig.d/agent-uplink.inc" in git
