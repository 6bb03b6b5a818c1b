"""Fixtures for the mitm addon tests: one test PKI and echo upstream per session, and a
main mitmdump (real addon + test-only redirect addon) whose rules file a test rewrites
before its requests (``uplink_reload_ms=0``, so the next request sees the new file)."""

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from addon_support import SENTINEL, Echo, PKI, Proxy, load_vectors  # noqa: E402


def vector_ips():
    import ipaddress
    ips = set()
    for case in load_vectors()["cases"]:
        try:
            ips.add(str(ipaddress.ip_address(case["request"]["host"])))
        except ValueError:
            pass
    return sorted(ips)


@pytest.fixture(scope="session")
def workdir():
    d = Path(tempfile.mkdtemp(prefix="uplink-addon-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def pki(workdir):
    return PKI(workdir)


@pytest.fixture(scope="session")
def echo(pki):
    e = Echo(pki, ips=vector_ips())
    yield e
    e.close()


@pytest.fixture(scope="session")
def proxy(workdir, pki, echo):
    """The main proxy: upstream trust = public roots + the test CA (uplink_extra_ca),
    client certificates per host, AWS credentials, every upstream redirected to echo."""
    p = Proxy(workdir, pki, echo, "main", sets=[
        f"uplink_extra_ca={pki.upstream_ca}", f"client_certs={pki.client_certs}"])
    yield p
    p.stop()
    out = p.mitm.output()
    assert SENTINEL not in out, "a secret value reached the main proxy's output"
