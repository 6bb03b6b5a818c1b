"""The cluster every e2e test runs on, from one fixture: this machine's local cluster
(localcluster.py) by default, or the live k3s with Kata of UPLINK_E2E_CONTEXT. Tests that
need the local cluster's docker or fake upstreams ask for `local` and skip, saying so, on
a live one."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from localcluster import FAKES, LocalCluster, unavailable  # noqa: E402
from uplinktest import bound_tests, sanitized  # noqa: E402


def pytest_collection_modifyitems(config, items):
    bound_tests(config, items)


class LiveCluster:
    """A live k3s with Kata, used through the user's installed, running uplinkd and the
    kubectl context CTX."""
    live = True

    def __init__(self, ctx):
        self.context = ctx

    def kubectl(self, *args, timeout=120):
        return subprocess.run(["kubectl", "--context", self.context, *args],
                              capture_output=True, text=True, timeout=timeout)

    def run_flags(self):
        return ["--deploy-context", self.context]


def live_unusable(ctx):
    """Why the live cluster of context CTX cannot be used (None when it can)."""
    try:
        r = LiveCluster(ctx).kubectl("get", "runtimeclass", "kata-clh", "-o", "name", timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "kubectl cannot reach context %s: %s" % (ctx, e)
    if r.returncode != 0:
        return "context %s is not usable or has no RuntimeClass kata-clh: %s" % (
            ctx, r.stderr.strip())
    return None


@pytest.fixture(scope="session")
def cluster():
    ctx = os.environ.get("UPLINK_E2E_CONTEXT")
    if ctx:
        why = live_unusable(ctx)
        if why:
            pytest.skip("UPLINK_E2E_CONTEXT=%s: %s" % (ctx, why))
        yield LiveCluster(ctx)
        return
    why = unavailable()
    if why:
        pytest.skip("no local cluster: " + why)
    if sanitized():
        pytest.skip("the local cluster runs with the normal build only (minutes per run; "
                    "the sanitizers see the same code in tests/integration)")
    tmp = Path(tempfile.mkdtemp(prefix="uple2e-", dir="/tmp"))
    tmp.chmod(0o755)      # the user's uplinkd reads the test CA here
    lc = LocalCluster(tmp, fakes=FAKES).start()
    yield lc
    lc.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def local(cluster):
    """The local cluster, for a test that needs its docker, its fake upstreams or a daemon
    of its own; skipped on a live cluster."""
    if cluster.live:
        pytest.skip("needs the local cluster (its docker, fake upstreams and test login); "
                    "UPLINK_E2E_CONTEXT runs the tests that do not")
    return cluster
