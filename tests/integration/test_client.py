"""The uplink command line against a real uplinkd (and against fakes that misbehave)."""

import json
import os
import socket
import subprocess
import threading

from uplinktest import uplink_bin


def test_status_human(daemon):
    r = daemon.client("status")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("uplinkd 0.1.0 (protocol 1), pid ")
    assert lines[1] == f"socket:    {daemon.socket}"
    assert lines[2].startswith("clients:   1 connected")
    assert lines[3] == "watchdog:  off"
    assert r.stderr == ""


def test_status_json(daemon):
    r = daemon.client("status", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["pid"] == daemon.proc.pid
    assert s["protocol"] == 1
    assert s["socket"] == str(daemon.socket)
    assert s["uid"] == os.getuid()
    assert s["connections"]["clients"] == 1
    assert s["connections"]["requests_total"] >= 2  # hello + status


def test_help_and_version(daemon):
    r = daemon.client("--help")
    assert r.returncode == 0
    assert "Exit status:" in r.stdout and "status" in r.stdout
    assert "3  uplinkd cannot be reached" in r.stdout
    r = daemon.client("status", "--help")
    assert r.returncode == 0
    assert r.stdout.startswith("Usage: uplink status [--json]")
    r = daemon.client("--version")
    assert r.returncode == 0 and r.stdout.startswith("uplink 0.1.0 (protocol 1)")


def test_usage_errors(daemon):
    r = daemon.client()
    assert r.returncode == 2 and "Usage: uplink COMMAND" in r.stderr
    r = daemon.client("frobnicate")
    assert r.returncode == 2
    assert r.stderr == "uplink: unknown command 'frobnicate'; see uplink --help\n"
    r = daemon.client("status", "--jsn")
    assert r.returncode == 2
    assert r.stderr == "uplink status: unknown option '--jsn' (see uplink status --help)\n"
    r = daemon.client("status", "extra")
    assert r.returncode == 2
    assert "uplink status: unexpected argument 'extra'" in r.stderr


def test_unreachable_daemon_says_how_to_start_it(tmpdir_short):
    env = {**os.environ, "UPLINK_SOCKET": str(tmpdir_short / "nothing.sock")}
    r = subprocess.run([uplink_bin(), "status"], env=env, capture_output=True, text=True)
    assert r.returncode == 3
    assert f"uplinkd is not running (nothing answers at {tmpdir_short}/nothing.sock)" in r.stderr
    assert "systemctl --user start uplinkd.socket" in r.stderr
    assert r.stdout == ""


def _fake_daemon(path, answer):
    """A one-shot server that answers the first line with `answer` (or closes on None)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def run():
        conn, _ = srv.accept()
        buf = b""
        while b"\n" not in buf:
            chunk = conn.recv(4096)
            if not chunk:
                break
            buf += chunk
        if answer is not None:
            req = json.loads(buf.split(b"\n")[0])
            conn.sendall((json.dumps(answer(req)) + "\n").encode())
        conn.close()
        srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_protocol_mismatch_exit_code(tmpdir_short):
    path = tmpdir_short / "old.sock"

    def answer(req):
        assert req["method"] == "daemon.hello" and req["params"]["protocol"] == 1
        return {"jsonrpc": "2.0", "id": req["id"], "error": {
            "code": -32001, "message": "the client speaks protocol 1 but uplinkd 9.9 speaks protocol 2",
            "data": {"name": "PROTOCOL_MISMATCH"}}}

    t = _fake_daemon(path, answer)
    r = subprocess.run([uplink_bin(), "status"], env={**os.environ, "UPLINK_SOCKET": str(path)},
                       capture_output=True, text=True, timeout=10)
    t.join(5)
    assert r.returncode == 4
    assert "speaks protocol 2" in r.stderr


def test_daemon_closing_mid_call(tmpdir_short):
    path = tmpdir_short / "rude.sock"
    t = _fake_daemon(path, None)
    r = subprocess.run([uplink_bin(), "status"], env={**os.environ, "UPLINK_SOCKET": str(path)},
                       capture_output=True, text=True, timeout=10)
    t.join(5)
    assert r.returncode == 3
    assert "uplinkd closed the connection" in r.stderr


def test_protocol_mismatch_from_real_daemon(daemon):
    with daemon.rpc() as c:
        msg = c.call_raw("daemon.hello", {"protocol": 99, "client": "9.9.9"})
    err = msg["error"]
    assert err["data"]["name"] == "PROTOCOL_MISMATCH"
    assert err["code"] == -32001
    assert "the client 9.9.9 speaks protocol 99 but uplinkd 0.1.0 speaks protocol 1" in err["message"]
    assert "systemctl --user restart uplinkd" in err["message"]


def test_a_deleted_current_folder_is_named_with_the_fix(tmpdir_short):
    gone = tmpdir_short / "gone"
    gone.mkdir()
    for cmd, fix in ((["config", "show"], "cd into an existing folder"),
                     (["run", "claude"], "cd into an existing folder under your home")):
        # the shell enters the folder, removes it, then runs uplink from nowhere
        r = subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(gone),
                            uplink_bin(), *cmd], capture_output=True, text=True, timeout=30,
                           env={**os.environ, "UPLINK_SOCKET": str(tmpdir_short / "none.sock")})
        gone.mkdir()
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "cannot tell the current folder: No such file or directory; " + fix in r.stderr


def _commands():
    """Every command `uplink --help` lists, as its words."""
    out = subprocess.run([uplink_bin(), "--help"], capture_output=True, text=True).stdout
    section = out.split("Commands:\n")[1].split("\n\n")[0]
    return [line[2:16].split() for line in section.splitlines()]


def _listening(path):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(64)
    srv.setblocking(False)
    return srv


def _connected(srv):
    """Whether a client connected: a connection waits in the backlog until accepted."""
    try:
        srv.accept()[0].close()
        return True
    except BlockingIOError:
        return False


def test_every_command_refuses_an_unknown_option_in_one_line(tmpdir_short):
    srv = _listening(tmpdir_short / "d.sock")
    env = {**os.environ, "UPLINK_SOCKET": str(tmpdir_short / "d.sock")}
    commands = _commands()
    assert ["run"] in commands and ["rules", "lint"] in commands and len(commands) >= 16
    for words in commands:
        # After the command's arguments too: `uplink stop x --foo` is no session id.
        for argv in (words + ["--foo"], words + ["x", "--foo"]):
            r = subprocess.run([uplink_bin(), *argv], env=env, capture_output=True,
                               text=True, timeout=10)
            name = " ".join(words)
            assert r.returncode == 2, (argv, r.stderr)
            assert r.stderr == f"uplink {name}: unknown option '--foo' (see uplink {name} --help)\n", argv
            assert r.stdout == ""
    assert not _connected(srv), "a command with an unknown option reached the daemon"
    srv.close()


def test_stop_with_an_unknown_option_does_not_reach_the_daemon(tmpdir_short):
    srv = _listening(tmpdir_short / "d.sock")
    r = subprocess.run([uplink_bin(), "stop", "x", "--foo"],
                       env={**os.environ, "UPLINK_SOCKET": str(tmpdir_short / "d.sock")},
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert r.stderr == "uplink stop: unknown option '--foo' (see uplink stop --help)\n"
    assert not _connected(srv)
    srv.close()


def test_an_option_is_named_as_given(daemon):
    r = daemon.client("rules", "lint", "--rules", "x")
    assert r.returncode == 2
    assert r.stderr == ("uplink rules lint: unknown option '--rules' "
                        "(see uplink rules lint --help)\n")
    r = daemon.client("rules", "check", "--rules")
    assert r.returncode == 2
    assert r.stderr == ("uplink rules check: option '--rules' needs a value "
                        "(see uplink rules check --help)\n")
    r = daemon.client("clean", "-q")
    assert r.returncode == 2
    assert r.stderr == "uplink clean: unknown option '-q' (see uplink clean --help)\n"
