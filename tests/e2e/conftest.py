import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))


def _live_cluster():
    """The reason there is no usable live cluster, or None when there is one."""
    if os.environ.get("UPLINK_E2E") != "1":
        return "set UPLINK_E2E=1 to run against a live cluster (see README, Live-cluster tests)"
    ctx = os.environ.get("UPLINK_E2E_CONTEXT", "local-k8s-admin")
    try:
        r = subprocess.run(["kubectl", "--context", ctx, "get", "runtimeclass", "kata-clh", "-o", "name"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"kubectl cannot reach context {ctx}: {e}"
    if r.returncode != 0:
        return f"context {ctx} is not usable or has no RuntimeClass kata-clh: {r.stderr.strip()}"
    return None


@pytest.fixture(scope="session")
def live():
    why = _live_cluster()
    if why:
        pytest.skip(why)
    return os.environ.get("UPLINK_E2E_CONTEXT", "local-k8s-admin")
