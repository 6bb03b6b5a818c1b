"""Fixtures for the rules tests: uplinkd with a private Secret Service.

A private dbus-daemon (our own child) and gnome-keyring-daemon started with
--unlock on it, in a throwaway HOME and XDG_RUNTIME_DIR. Started any other way
(by D-Bus activation), gnome-keyring comes up locked, wants a prompter it cannot
show without a display, and every store fails. The keyring daemon exits by
itself when its bus goes away.
"""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from uplinktest import Daemon, start_dbus_daemon, wait_for

PYTHON = "/usr/bin/python3"  # Debian's, which has the keyring module


class Keyring:
    def __init__(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="upk-", dir="/tmp"))
        home, run = self.tmp / "home", self.tmp / "run"
        home.mkdir(mode=0o700)
        run.mkdir(mode=0o700)
        self.env = dict(os.environ)
        self.env.update({"HOME": str(home), "XDG_RUNTIME_DIR": str(run),
                         "XDG_DATA_HOME": str(home / ".local" / "share"),
                         "DBUS_SESSION_BUS_ADDRESS": f"unix:path={run}/bus"})
        self.env.pop("DISPLAY", None)
        # Ready once it prints its address (its socket file exists before it listens).
        self.bus, address = start_dbus_daemon("--session", f"--address=unix:path={run}/bus",
                                              env=self.env)
        # gnome-keyring-daemon prints its environment once it runs; the Secret Service is
        # there when it owns its name on the bus.
        subprocess.run(["gnome-keyring-daemon", "--unlock", "--components=secrets"],
                       input=b"pass", env=self.env, check=True, capture_output=True, timeout=60)
        import dbus
        conn = dbus.bus.BusConnection(address)
        wait_for(lambda: conn.name_has_owner("org.freedesktop.secrets"),
                 what="gnome-keyring's Secret Service on the bus")
        conn.close()

    def py(self, code):
        return subprocess.run([PYTHON, "-c", code], env=self.env, check=True,
                              capture_output=True, text=True, timeout=20).stdout

    def set(self, service, user, value):
        """Stores as Python's keyring does: `keyring set SERVICE USER`."""
        self.py(f"import keyring; keyring.set_password({service!r}, {user!r}, {value!r})")

    def lock(self):
        self.py("import secretstorage\n"
                "c = secretstorage.dbus_init()\n"
                "for col in secretstorage.get_all_collections(c):\n"
                "    col.lock()\n")

    def close(self):
        self.bus.stdout.close()
        self.bus.terminate()
        try:
            self.bus.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.bus.kill()
            self.bus.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def keyring():
    k = Keyring()
    yield k
    k.close()


@pytest.fixture(scope="module")
def rules_daemon(keyring):
    """uplinkd that sees the private keyring; one per test module."""
    tmp = Path(tempfile.mkdtemp(prefix="upr-", dir="/tmp"))
    tmp.chmod(0o755)
    env = {k: keyring.env[k] for k in ("DBUS_SESSION_BUS_ADDRESS", "XDG_DATA_HOME")}
    d = Daemon(tmp, env=env).start()
    yield d
    rc = d.stop()
    logs = d.logs()
    d.close()
    shutil.rmtree(tmp, ignore_errors=True)
    assert rc == 0, f"uplinkd exited {rc}; its log:\n{logs}"
    assert "uplink-sentinel" not in logs, "a secret reached uplinkd's log"


@pytest.fixture
def rules_file(tmp_path):
    """Writes a rules file (text) and returns its path."""
    n = [0]

    def make(text, name=None):
        n[0] += 1
        p = tmp_path / (name or f"rules{n[0]}.yaml")
        p.write_text(text)
        return p
    return make
