"""Rules and AWS credentials files change while the proxy runs: the next request after the
poll interval follows the new file; a broken new file keeps the last good set and says why
(without echoing secret values); a broken file at start-up stops mitmdump. filter.py
loads its modules afresh on a reload, and a missing one stops mitmdump."""

import json
import os
import subprocess
import time
import uuid

import pytest

from addon_support import (AWS_CREDS, AWS_DUMMY, FILTER, SENTINEL, Proxy, rules_doc, send,
                           write_atomic)

RELOAD_MS = 200
SLOW = float(os.environ.get("UPLINK_TEST_SLOW", "3"))


def allow(host):
    return [{"name": f"allow-{host}", "layer": "user", "hosts": [host.replace(".", "\\.")]}]


@pytest.fixture(scope="module")
def reloading(workdir, pki, echo):
    p = Proxy(workdir, pki, echo, "reload", reload_ms=RELOAD_MS,
              sets=[f"ssl_verify_upstream_trusted_ca={pki.upstream_ca}"])
    yield p
    p.stop()
    assert SENTINEL not in p.mitm.output()


def status(p, host):
    res = send(p.port, "https", host, 443, "GET", "/", trust=p.pki.mitm_ca)
    return res.status if res.connect_status == 200 else res.connect_status


def after_poll():
    time.sleep(RELOAD_MS / 1000 + 0.1)


def test_reload_follows_new_rules_and_keeps_last_good(reloading):
    p = reloading
    p.set_rules(allow("a.uplink.test"))
    after_poll()
    assert (status(p, "a.uplink.test"), status(p, "b.uplink.test")) == (200, 403)

    p.set_rules(allow("b.uplink.test"))
    after_poll()
    assert (status(p, "a.uplink.test"), status(p, "b.uplink.test")) == (403, 200)

    broken = [
        ("{\"version\": 1, \"rules\": [", "not valid JSON"),
        (json.dumps({"version": 1, "rules": [{"name": "x", "layer": "user", "hosts": [".*"],
                                                "method": ["GET"]}]}), "unknown key 'method'"),
        (json.dumps({"version": 2, "rules": []}), "unsupported format version 2"),
        (json.dumps({"version": 1, "rules": [{"name": "x", "layer": "user", "hosts": ["("]}]}),
         "invalid host regex '('"),
        (json.dumps({"version": 1, "rules": [{"name": "x", "layer": "user", "hosts": [".*"],
                                              "inject": {"headers": {
                                                  "Authorization": f"a\r\nX-Evil: {SENTINEL}"}}}]}),
         "value of header 'Authorization' must be a string without control characters"),
        (json.dumps({"version": 1, "rules": [], "rules ": []}), "unknown top-level key 'rules '"),
        ('{"version": 1, "rules": [], "rules": [{"name": "x", "layer": "u", "hosts": [".*"]}]}',
         "duplicate key 'rules'"),
    ]
    for text, why in broken:
        write_atomic(p.rules_path, text)
        after_poll()
        assert (status(p, "a.uplink.test"), status(p, "b.uplink.test")) == (403, 200), why
        err = p.mitm.stderr.read_text()
        assert why in err and "keeping the previous version" in err, (why, err)

    os.unlink(p.rules_path)
    after_poll()
    assert status(p, "b.uplink.test") == 200
    assert "cannot read" in p.mitm.stderr.read_text()

    p.set_rules(allow("a.uplink.test"))
    after_poll()
    assert (status(p, "a.uplink.test"), status(p, "b.uplink.test")) == (200, 403)


def test_in_place_rewrite_is_noticed(reloading):
    """Not every writer renames: a file rewritten in place is picked up too."""
    p = reloading
    p.set_rules(allow("a.uplink.test"))
    after_poll()
    with open(p.rules_path, "w") as f:
        f.write(rules_doc(allow("c.uplink.test")))
    after_poll()
    assert (status(p, "a.uplink.test"), status(p, "c.uplink.test")) == (403, 200)


def test_aws_credentials_reload(proxy):
    rules = [{"name": "aws", "layer": "user", "hosts": [".*\\.amazonaws\\.com"],
              "aws_sign": True}]
    dummy = [("Authorization", f"AWS4-HMAC-SHA256 Credential={AWS_DUMMY}/20200101/us-east-1/s3/"
                               "aws4_request, SignedHeaders=host, Signature=" + "0" * 64)]

    def signed_key():
        tid = uuid.uuid4().hex
        res = send(proxy.port, "https", "b.s3.amazonaws.com", 443, "GET", "/k",
                   headers=dummy + [("X-Test-Id", tid)], trust=proxy.pki.mitm_ca)
        assert res.status == 200
        authz = [v for k, v in proxy.echo.find(tid)[0]["headers"] if k == "Authorization"][0]
        return authz.split("Credential=")[1].split("/")[0]

    with proxy.lock:
        proxy.set_rules(rules)
        try:
            assert signed_key() == AWS_CREDS[AWS_DUMMY]["access_key_id"]
            new = dict(AWS_CREDS, **{AWS_DUMMY: {"access_key_id": "AKIANEWNEWNEWNEW0003",
                                                 "secret_access_key": SENTINEL + "-new"}})
            write_atomic(proxy.creds_path, json.dumps(new))
            assert signed_key() == "AKIANEWNEWNEWNEW0003"
            write_atomic(proxy.creds_path, json.dumps({AWS_DUMMY: {"access_key_id": "x"}}))
            assert signed_key() == "AKIANEWNEWNEWNEW0003"
            assert "'secret_access_key' must be a non-empty string" in \
                proxy.mitm.stderr.read_text()
        finally:
            write_atomic(proxy.creds_path, json.dumps(AWS_CREDS))
        assert signed_key() == AWS_CREDS[AWS_DUMMY]["access_key_id"]


def test_broken_rules_at_startup_stop_mitmdump(workdir, pki):
    bad = workdir / "broken-at-start.json"
    bad.write_text('{"version": 1, "rules": [{"name": "x"}]}')
    proc = subprocess.run(
        ["/usr/bin/mitmdump", "--listen-host", "127.0.0.1", "--listen-port", "0",
         "--set", f"confdir={pki.confdir}", "-s", str(FILTER), "--set", f"uplink_rules={bad}"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert proc.returncode != 0
    assert "rules[0]: 'layer' must be a non-empty string" in proc.stdout + proc.stderr


def addon_copy(folder, without=()):
    """filter.py and the modules it loads, copied to ``folder`` (less ``without``)."""
    folder.mkdir()
    for src in FILTER.parent.glob("*.py"):
        if src.name not in without:
            (folder / src.name).write_bytes(src.read_bytes())
    return folder / "filter.py"


def test_a_missing_module_stops_mitmdump_naming_it(workdir, pki):
    script = addon_copy(workdir / "addon-without-aws", without=("uplink_aws.py",))
    proc = subprocess.run(
        ["/usr/bin/mitmdump", "--listen-host", "127.0.0.1", "--listen-port", "0",
         "--set", f"confdir={pki.confdir}", "-s", str(script)],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert proc.returncode != 0
    assert f"{script.parent / 'uplink_aws.py'} is missing" in proc.stdout + proc.stderr


def wait_for_text(path, text, proc):
    deadline = time.monotonic() + 20 * SLOW
    while text not in path.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, path.read_text()
        time.sleep(0.05)


def test_a_reload_of_filter_py_rereads_its_modules(workdir, pki):
    """mitmproxy re-runs filter.py when it changes; the modules must be read again too,
    not taken as first imported."""
    script = addon_copy(workdir / "addon-reloaded")
    log = workdir / "addon-reloaded.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["/usr/bin/mitmdump", "--listen-host", "127.0.0.1", "--listen-port", "0",
             "--set", f"confdir={pki.confdir}", "-s", str(script)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1"))
    try:
        wait_for_text(log, "Proxy server listening", proc)
        with open(script.parent / "uplink_rules.py", "a", encoding="utf-8") as f:
            f.write('\nimport sys as _sys\n_sys.stderr.write("uplinktest-modules-reread\\n")\n')
        st = script.stat()
        os.utime(script, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # what mitmproxy watches
        wait_for_text(log, "uplinktest-modules-reread", proc)
    finally:
        proc.terminate()
        proc.wait(10)
