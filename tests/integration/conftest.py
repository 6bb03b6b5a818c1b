import errno
import http.server
import os
import sys
import socket
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from uplinktest import ROOT, Bus, Daemon, Env, Registry, bound_tests, uplink_bin, uplinkd_bin  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "fakekube"))


# Sanitizer findings must fail a run here as they do in CI, not scroll past in a log.
os.environ.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
os.environ.setdefault("ASAN_OPTIONS", "detect_leaks=1")


def pytest_collection_modifyitems(config, items):
    bound_tests(config, items)


def pytest_configure(config):
    for b in (uplinkd_bin(), uplink_bin()):
        if not os.access(b, os.X_OK):
            raise pytest.UsageError(f"{b} is missing: build first (meson setup build && ninja -C build) "
                                    "or point UPLINK_BUILD at a build folder")


@pytest.fixture
def tmpdir_short(tmp_path_factory):
    """A short private folder: socket paths must fit in 108 bytes."""
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="upl-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    import shutil
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def daemon(tmpdir_short):
    d = Daemon(tmpdir_short).start()
    yield d
    rc = d.stop()
    d.close()
    assert rc == 0, f"uplinkd exited {rc}; its log:\n{d.logs()}"
    assert "left open" not in d.logs()


@pytest.fixture
def bus(tmpdir_short):
    """A private session bus (uplinktest.Bus); .start_server() adds the mock notification
    server. Both stopped afterwards."""
    b = Bus(tmpdir_short)
    yield b
    b.close()


@pytest.fixture
def fakekube(tmp_path):
    """A fake Kubernetes API server with quick pod and namespace lifecycles."""
    from fakekube import FakeKube
    fk = FakeKube(str(tmp_path / "fakekube"), ready_delay=0.2, terminate_delay=0.2,
                  bookmark_interval=0.5)
    fk.start()
    yield fk
    fk.stop()


@pytest.fixture
def registry():
    Registry.present = set()
    Registry.heads = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def registry_5000():
    """The registry stand-in where the in-cluster one would answer: localhost:5000."""
    Registry.present = set()
    Registry.heads = []
    # "localhost" may be ::1 first: hold [::1]:5000 too (bound, not listening: a connection
    # there is refused and the client falls back to 127.0.0.1), or another registry
    # listening on IPv6 (a local cluster's) would answer instead of this one
    v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        v6.bind(("::1", 5000))
    except OSError as e:
        v6.close()
        if e.errno == errno.EADDRINUSE:
            pytest.skip(f"[::1]:5000 is taken here ({e}); the in-cluster registry test needs it")
    try:
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 5000), Registry)
    except OSError as e:
        v6.close()
        pytest.skip(f"127.0.0.1:5000 is taken here ({e}); the in-cluster registry test needs it")
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    v6.close()


@pytest.fixture
def env(tmpdir_short, fakekube, registry):
    e = Env(tmpdir_short, fakekube, registry)
    yield from e.running()
