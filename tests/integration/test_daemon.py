"""uplinkd's life: socket activation, its own socket, the lock, peers, shutdown, units."""

import os
import shutil
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from uplinktest import ROOT, Daemon, Rpc, build_dir, sanitized, uplinkd_bin, wait_for


def test_socket_activated_ready_before_first_answer(tmpdir_short):
    d = Daemon(tmpdir_short, activated=True, notify=True).start()
    try:
        # systemd-socket-activate execs uplinkd on the first connection.
        with Rpc(d.socket) as c:
            hello = c.call("daemon.hello", {"protocol": 1})
            # READY=1 was sent before the loop served anything, so it is queued already.
            msgs = d.notify.drain()
            assert any("READY=1" in m.split("\n") for m in msgs), msgs
            assert any(l.startswith("STATUS=Listening on ") for m in msgs for l in m.split("\n"))
            status = c.call("daemon.status")
        assert hello["protocol"] == 1
        assert status["socket_activated"] is True
        assert status["socket"] == str(d.socket)
        assert status["pid"] == hello["pid"]
    finally:
        rc = d.stop()
        d.close()
    assert rc == 0, d.logs()
    assert any("STOPPING=1" in m.split("\n") for m in d.notify.messages)
    # The socket belongs to the activator: uplinkd leaves it in place.
    assert "(socket-activated)" in d.logs()


def test_watchdog_pings_when_enabled(tmpdir_short):
    # Without WATCHDOG_PID, sd_watchdog_enabled() takes WATCHDOG_USEC as meant for us.
    d = Daemon(tmpdir_short, notify=True, env={"WATCHDOG_USEC": "200000"}).start()
    try:
        wait_for(lambda: sum("WATCHDOG=1" in m.split("\n") for m in d.notify.drain()) >= 3,
                 timeout=5, what="three WATCHDOG=1 pings")
        with d.rpc() as c:
            assert c.call("daemon.status")["watchdog"] is True
    finally:
        assert d.stop() == 0
        d.close()


def test_binds_its_own_socket_with_private_modes(tmpdir_short):
    d = Daemon(tmpdir_short).start()
    try:
        st = os.stat(d.socket)
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert stat.S_IMODE(os.stat(d.rundir).st_mode) == 0o700
        lock = d.rundir / "uplinkd.lock"
        assert lock.read_text().strip() == str(d.proc.pid)
        assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600
        with d.rpc() as c:
            assert c.call("daemon.status")["socket_activated"] is False
    finally:
        assert d.stop() == 0
        d.close()
    assert not d.socket.exists(), "a socket uplinkd bound itself is removed at exit"


def test_default_socket_under_xdg_runtime_dir(tmpdir_short):
    d = Daemon(tmpdir_short)
    del d.env["UPLINK_SOCKET"]
    d.socket = d.rundir / "uplink" / "uplinkd.sock"
    d.rundir.mkdir(mode=0o700)
    d.start()
    try:
        assert stat.S_IMODE(os.stat(d.socket.parent).st_mode) == 0o700
        r = d.client("status", env={"UPLINK_SOCKET": ""})
        assert r.returncode == 0, r.stderr
        assert str(d.socket) in r.stdout
    finally:
        assert d.stop() == 0
        d.close()


def test_second_daemon_refused(daemon):
    second = subprocess.run([uplinkd_bin()], env=daemon.env, capture_output=True, text=True,
                            timeout=10)
    assert second.returncode == 1
    assert f"Another uplinkd (pid {daemon.proc.pid}) is already running" in second.stderr
    assert "uplinkd.lock" in second.stderr
    # The first one is unharmed and its socket still there.
    assert daemon.answers()


def test_stale_socket_is_replaced(tmpdir_short):
    d = Daemon(tmpdir_short)
    d.rundir.mkdir(mode=0o700)
    d.socket.write_text("stale")  # left by a daemon that was killed
    d.start()
    try:
        assert d.answers()
    finally:
        assert d.stop() == 0
        d.close()


def test_peer_with_another_uid_refused(tmpdir_short):
    if os.geteuid() != 0:
        pytest.skip("needs root to run the client as another user")
    d = Daemon(tmpdir_short)
    d.rundir.mkdir(mode=0o755)
    d.start()
    try:
        # Open the socket to everyone so that only the daemon's own check stands in the way.
        os.chmod(d.socket, 0o666)
        r = d.client("status", user=65534)
        if r.returncode in (126, 127) or "Permission denied" in r.stderr and "uplinkd" not in r.stderr:
            pytest.skip(f"the client cannot run as another user here: {r.stderr.strip()}")
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert "this uplinkd belongs to uid 0; uid 65534 must use its own" in r.stderr
        wait_for(lambda: "Refused a client with uid 65534" in d.logs(), what="the refusal in the log")
        assert d.answers()
    finally:
        assert d.stop() == 0
        d.close()


def test_sigterm_with_open_connections_exits_cleanly(tmpdir_short):
    wrapper = []
    if not sanitized():
        if not shutil.which("valgrind"):
            pytest.skip("valgrind is not installed")
        wrapper = ["valgrind", "--quiet", "--leak-check=full", "--show-leak-kinds=definite,indirect",
                   "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=99"]
    d = Daemon(tmpdir_short, wrapper=wrapper).start()
    clients = []
    try:
        for _ in range(5):
            c = d.rpc()
            c.call("daemon.hello", {"protocol": 1})
            clients.append(c)
        # One with half a request buffered, one mid-batch.
        clients[0].send_raw('{"jsonrpc":"2.0","id":1,"meth')
        clients[1].send_raw('[{"jsonrpc":"2.0","id":1,"method":"daemon.status"}]\n'
                            '[{"jsonrpc":"2.0","id":2,"method":"daemon.status"}]\n')
        # The first batch answered (no sleep): uplinkd is mid-way through clients[1]'s input,
        # and clients[0]'s half request, sent before, is on its side of the socket.
        assert isinstance(clients[1].recv_msg(), list)
    finally:
        rc = d.stop(signal.SIGTERM, timeout=60)
        for c in clients:
            c.close()
        d.close()
    assert rc == 0, d.logs()
    assert "left open" not in d.logs()
    assert "Stopping (SIGTERM)" in d.logs()


def test_daemon_shutdown_method(daemon):
    with daemon.rpc() as c:
        assert c.call("daemon.shutdown") == {"stopping": True}
    assert daemon.proc.wait(timeout=10) == 0
    assert "Stopping (daemon.shutdown)" in daemon.logs()


def test_sigint_stops(tmpdir_short):
    d = Daemon(tmpdir_short).start()
    rc = d.stop(signal.SIGINT)
    d.close()
    assert rc == 0


def test_units_verify_clean(tmp_path):
    built = build_dir() / "systemd"
    service = (built / "uplinkd.service").read_text()
    # The installed path does not exist here: point ExecStart at the built binary instead.
    exec_line = next(l for l in service.splitlines() if l.startswith("ExecStart="))
    (tmp_path / "uplinkd.service").write_text(service.replace(exec_line, f"ExecStart={uplinkd_bin()}"))
    shutil.copy(built / "uplinkd.socket", tmp_path / "uplinkd.socket")
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    r = subprocess.run(["systemd-analyze", "--user", "verify",
                        str(tmp_path / "uplinkd.service"), str(tmp_path / "uplinkd.socket")],
                       env={**os.environ, "XDG_RUNTIME_DIR": str(run)}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    assert "Type=notify" in service and "WatchdogSec=" in service and "Restart=on-failure" in service


def test_socket_unit_activates_the_service_binary(tmpdir_short):
    """What uplinkd.socket declares, given to systemd-socket-activate, starts the daemon."""
    unit = (build_dir() / "systemd" / "uplinkd.socket").read_text()
    fdname = next(l.split("=", 1)[1] for l in unit.splitlines() if l.startswith("FileDescriptorName="))
    listen = next(l.split("=", 1)[1] for l in unit.splitlines() if l.startswith("ListenStream="))
    assert listen == "%t/uplink/uplinkd.sock"
    run = tmpdir_short / "rt"
    (run / "uplink").mkdir(parents=True, mode=0o700)
    sock = run / "uplink" / "uplinkd.sock"
    env = {**os.environ, "XDG_RUNTIME_DIR": str(run)}
    env.pop("UPLINK_SOCKET", None)
    log = open(tmpdir_short / "act.log", "wb")
    p = subprocess.Popen(["systemd-socket-activate", "-l", str(sock), f"--fdname={fdname}",
                          "-E", f"XDG_RUNTIME_DIR={run}", uplinkd_bin()], env=env, stdout=log, stderr=log)
    try:
        # It prints this once it listens; the path exists as soon as it is bound.
        wait_for(lambda: f"Listening on {sock} as ".encode() in (tmpdir_short / "act.log").read_bytes(),
                 what="systemd-socket-activate to listen")
        r = subprocess.run([str(build_dir() / "client" / "uplink"), "status", "--json"], env=env,
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, r.stderr
        assert '"socket_activated": true' in r.stdout
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 0
        log.close()
