"""AWS profiles end to end (docs/architecture.md, "What a session borrows from the host"):
the real daemon against the fake API server with an `aws` CLI stand-in first on its PATH;
what it puts in the cluster fed to the real mitmdump running the real addon (the SigV4
harness of tests/integration/addon), whose re-signed requests botocore verifies with the
real secret; the daemon renewing the credentials before they expire
(UPLINK_DEBUG_TIME_DIVISOR=60 makes minutes seconds), and telling the user once when it
cannot."""

import base64
import hashlib
import json
import sys
import uuid
from pathlib import Path

import pytest

from uplinktest import Env, ROOT, Rpc, run_detached, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parent / "addon"))
from addon_support import PKI, Echo, Proxy, send, write_atomic  # noqa: E402
from test_addon_sigv4 import botocore_auth, dummy_headers  # noqa: E402

EXPIRES_IN = 120  # seconds, as the stand-in says; 2 s once divided by 60
AWS_RULES = str(ROOT / "examples" / "rules" / "aws.yaml")


def dummy_akid(profile):
    return "AKIA" + hashlib.sha256(profile.encode()).hexdigest()[:16].upper()


@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    e.aws_calls = e.tmp / "aws-calls"
    e.aws_fail = e.tmp / "aws-fail"
    e.daemon.env.update({
        "PATH": f"{ROOT}/tests/data/aws:" + e.daemon.env["PATH"],
        "FAKE_AWS_CALLS": str(e.aws_calls), "FAKE_AWS_EXPIRES_IN": str(EXPIRES_IN),
        "FAKE_AWS_FAIL_FILE": str(e.aws_fail), "UPLINK_DEBUG_TIME_DIVISOR": "60",
        "UPLINK_NOTIFIER": "log"})
    yield from e.running()
    assert "Handles were left open at exit" not in e.daemon.logs()  # the refresh timers closed


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """The real mitmdump with the real addon; every upstream redirected to an echo server."""
    workdir = tmp_path_factory.mktemp("aws-mitm")
    pki = PKI(workdir)
    echo = Echo(pki)
    p = Proxy(workdir, pki, echo, "aws", sets=[f"uplink_extra_ca={pki.upstream_ca}"])
    yield p
    p.stop()
    echo.close()


def secret_data(fk, ns, name, key):
    s = fk.get("Secret", ns, name)
    return base64.b64decode(s["data"][key]).decode() if s else None


def creds_of(fk, ns):
    return json.loads(secret_data(fk, ns, "aws-sigv4-creds", "creds.json"))


def agent_side(fk, ns):
    """The agent pod and every ConfigMap and Secret it mounts, as text."""
    pod = fk.get("Pod", ns, "agent")
    text = json.dumps(pod)
    for v in pod["spec"]["volumes"]:
        if "secret" in v:
            s = fk.get("Secret", ns, v["secret"]["secretName"])
            text += json.dumps(s) + "".join(base64.b64decode(x).decode(errors="replace")
                                            for x in (s.get("data") or {}).values())
        if "configMap" in v:
            text += json.dumps(fk.get("ConfigMap", ns, v["configMap"]["name"]))
    return text


def sts_through(proxy, akid):
    """A GetCallerIdentity POST signed with the dummy key, as the agent's aws CLI sends it."""
    tid = uuid.uuid4().hex
    body = b"Action=GetCallerIdentity&Version=2011-06-15"
    hdrs = dummy_headers(akid, "sts", payload=hashlib.sha256(body).hexdigest())
    hdrs += [("Content-Type", "application/x-www-form-urlencoded"), ("X-Test-Id", tid)]
    res = send(proxy.port, "https", "sts.amazonaws.com", 443, "POST", "/", headers=hdrs, body=body,
               trust=proxy.pki.mitm_ca)
    assert res.status == 200, res
    [rec] = proxy.echo.find(tid)
    return rec, body


def assert_signed_with(rec, body, real):
    """Recomputes, as AWS does, the signature from what the upstream received, with the
    real secret; and checks the dummy credentials went nowhere upstream."""
    hdrs = rec["headers"]
    get = lambda n: [v for k, v in hdrs if k.lower() == n]  # noqa: E731
    [authz] = get("authorization")
    assert authz.startswith(f"AWS4-HMAC-SHA256 Credential={real['access_key_id']}/"), authz
    signed = authz.split("SignedHeaders=")[1].split(",")[0].split(";")
    keep = [(k, v) for k, v in hdrs if k.lower() in signed and k.lower() not in (
        "x-amz-date", "x-amz-security-token", "host")]
    [amz_date] = get("x-amz-date")
    expected, _ = botocore_auth(rec["method"], f"https://sts.amazonaws.com{rec['path']}", keep, body,
                                "sts", "us-east-1", real["access_key_id"], real["secret_access_key"],
                                real.get("session_token"), amz_date, False)
    assert authz == expected
    assert get("x-amz-security-token") == [real["session_token"]]
    assert "DUMMY" not in json.dumps(hdrs) and "dummy-token" not in json.dumps(hdrs)


def test_dummy_keys_reach_the_agent_real_ones_are_renewed_and_resign_requests(env, proxy):
    sid, r = run_detached(env, "-a", "dev", "--rules", AWS_RULES)
    ns = f"agent-uplink-{sid}"
    fk = env.fk
    akid = dummy_akid("dev")
    first = creds_of(fk, ns)
    assert list(first) == [akid]
    real1 = first[akid]
    assert real1["secret_access_key"].startswith("SENTINELsecret/dev/")
    # the agent: the dummy key only
    cm = fk.get("ConfigMap", ns, "agent-aws-creds")["data"]["credentials"]
    assert f"aws_access_key_id = {akid}\n" in cm
    assert "SENTINEL" not in agent_side(fk, ns)

    # the mitm, fed what the daemon put in the cluster: the rules and the credentials map
    write_atomic(proxy.rules_path, secret_data(fk, ns, "rules-json", "rules.json"))
    write_atomic(proxy.creds_path, json.dumps(first))
    rec, body = sts_through(proxy, akid)
    assert_signed_with(rec, body, real1)

    # renewed before they expire (2 minutes, 2 s here): the Secret changes
    wait_for(lambda: creds_of(fk, ns)[akid] != real1, timeout=30, what="the credentials to be renewed")
    real2 = creds_of(fk, ns)[akid]
    assert real2["secret_access_key"] != real1["secret_access_key"]
    wait_for(lambda: f"Session {sid}: AWS credentials renewed\n" in env.daemon.logs(),
             what="the log line")  # the apply's answer may trail the object
    # Kubernetes updates the mounted file; the addon reloads it on the next request
    write_atomic(proxy.creds_path, json.dumps(creds_of(fk, ns)))
    rec, body = sts_through(proxy, akid)
    assert_signed_with(rec, body, real2)
    # and it keeps going
    wait_for(lambda: creds_of(fk, ns)[akid] != real2, timeout=30, what="a second renewal")

    # no real secret anywhere but the mitm's Secret
    secrets = {s["metadata"]["name"]: json.dumps(s) + "".join(
        base64.b64decode(v).decode(errors="replace") for v in (s.get("data") or {}).values())
        for s in fk.list("Secret", ns)}
    assert [n for n, t in secrets.items() if "SENTINELsecret" in t] == ["aws-sigv4-creds"]
    assert "SENTINEL" not in agent_side(fk, ns)
    for cm in fk.list("ConfigMap", ns):
        assert "SENTINEL" not in json.dumps(cm)
    assert "SENTINEL" not in env.daemon.logs()
    assert "SENTINEL" not in r.stdout + r.stderr
    lst = env.daemon.client("list", "--json")
    assert "SENTINEL" not in lst.stdout + lst.stderr
    # the session's end stops the renewals
    assert env.daemon.client("stop", sid, "--wait").returncode == 0
    n = len(env.aws_calls.read_text().splitlines())
    wait_for(lambda: fk.get("Namespace", None, ns) is None, timeout=30, what="the namespace to go")
    import time
    time.sleep(2.5)
    assert len(env.aws_calls.read_text().splitlines()) == n


def test_default_rules_resign_nothing(env, proxy):
    """--aws-profiles with the default rules: no generic-layer rule is marked as re-signing,
    and the mitm fed what the daemon rendered refuses the dummy-signed requests an attacker
    would send under the catch-all (its own execute-api host, STS GetSessionToken over GET),
    so neither the real key id nor the session token reaches an upstream."""
    sid, _ = run_detached(env, "-a", "dev")
    ns = f"agent-uplink-{sid}"
    akid = dummy_akid("dev")
    doc = json.loads(secret_data(env.fk, ns, "rules-json", "rules.json"))
    layers = {x["name"]: x["layer"] for x in doc["rules"]}
    assert layers["default-readonly"] == "generic"
    assert [n for n, x in zip(layers, doc["rules"]) if x.get("aws_sign")
            and x["layer"] == "generic"] == []
    creds = creds_of(env.fk, ns)
    write_atomic(proxy.rules_path, json.dumps(doc))
    write_atomic(proxy.creds_path, json.dumps(creds))
    with proxy.echo.lock:
        since = len(proxy.echo.requests)  # the proxy is the module's: earlier tests re-signed
    for host, path, service in [
            ("abc123.execute-api.us-east-1.amazonaws.com", "/prod/steal", "execute-api"),
            ("sts.amazonaws.com", "/?Action=GetSessionToken&Version=2011-06-15", "sts")]:
        tid = uuid.uuid4().hex
        res = send(proxy.port, "https", host, 443, "GET", path,
                   headers=dummy_headers(akid, service) + [("X-Test-Id", tid)],
                   trust=proxy.pki.mitm_ca)
        assert res.status == 403 and res.header("X-Uplink-Denied") == "1", res
        assert "does not re-sign AWS requests" in res.json()["hint"]
        assert proxy.echo.find(tid) == []
    with proxy.echo.lock:
        seen = json.dumps(proxy.echo.requests[since:])
    assert creds[akid]["access_key_id"] not in seen and creds[akid]["session_token"] not in seen
    assert env.daemon.client("stop", sid, "--wait").returncode == 0


def test_a_failing_renewal_is_retried_and_notified_once(env):
    sid, _ = run_detached(env, "-a", "dev", "--rules", AWS_RULES)
    ns = f"agent-uplink-{sid}"
    akid = dummy_akid("dev")
    before = creds_of(env.fk, ns)[akid]
    env.aws_fail.write_text("")  # the SSO session ended
    note = "Notification: claude credentials could not be refreshed"
    wait_for(lambda: note in env.daemon.logs(), timeout=30, what="the notification")
    logs = env.daemon.logs()
    assert (f"Session {sid}: AWS profile 'dev': cannot export its credentials (aws: Error loading "
            "SSO Token: Token for dev does not exist); if it uses SSO, run: aws sso login "
            "--profile dev") in logs
    assert f"Session {sid}: cannot renew AWS credentials: AWS profile 'dev'" in logs
    # retried (with backoff), but told once
    n = len(env.aws_calls.read_text().splitlines())
    wait_for(lambda: len(env.aws_calls.read_text().splitlines()) >= n + 2, timeout=30,
             what="retries")
    assert env.daemon.logs().count(note) == 1
    assert creds_of(env.fk, ns)[akid] == before
    # logged in again: the next attempt succeeds and the Secret has fresh keys
    env.aws_fail.unlink()
    wait_for(lambda: creds_of(env.fk, ns)[akid] != before, timeout=30, what="the renewal")
    with Rpc(env.daemon.socket) as c:
        assert c.call("session.get", {"id": sid})["state"] == "RUNNING"
    assert "SENTINEL" not in env.daemon.logs()


def restart(env):
    """uplinkd stopped (SIGTERM: a clean exit, the sessions go on) and started again on the
    same state folder; returns where the new daemon's log begins."""
    assert env.daemon.stop() == 0, env.daemon.logs()[-3000:]
    assert "Handles were left open at exit" not in env.daemon.logs()
    mark = len(env.daemon.logs())
    env.daemon.start()
    wait_for(lambda: '"state": "ready"' in env.daemon.client("status", "--json").stdout, what="sync")
    return mark


def test_after_a_restart_the_new_daemon_goes_on_renewing(env):
    sid, r = run_detached(env, "-a", "dev", "--rules", AWS_RULES)
    ns = f"agent-uplink-{sid}"
    akid = dummy_akid("dev")
    record = env.tmp / "state" / "uplink" / "sessions" / f"{sid}.json"
    wait_for(lambda: "renews" in json.loads(record.read_text()), what="the record to say what is renewed")
    rec = json.loads(record.read_text())
    assert rec["renews"] == ["AWS credentials", "the agent's login token"]
    assert rec["aws_profiles"] == ["dev"] and rec["aws_expires_at"] > 0 and rec["login_expires_at"] > 0
    assert rec["exec_refresh_s"] == 0
    labels = env.fk.get("Secret", ns, "aws-sigv4-creds")["metadata"].get("labels")
    mark = restart(env)
    at_restart = creds_of(env.fk, ns)[akid]
    calls = len(env.aws_calls.read_text().splitlines())
    # the new daemon renews them: the Secret changes, and again
    wait_for(lambda: creds_of(env.fk, ns)[akid] != at_restart, timeout=30,
             what="the credentials to be renewed by the new daemon")
    second = creds_of(env.fk, ns)[akid]
    assert second["secret_access_key"].startswith("SENTINELsecret/dev/")
    assert second["secret_access_key"] != at_restart["secret_access_key"]
    wait_for(lambda: creds_of(env.fk, ns)[akid] != second, timeout=30, what="a second renewal")
    assert len(env.aws_calls.read_text().splitlines()) >= calls + 2
    logs = env.daemon.logs()[mark:]
    assert (f"Session {sid} was picked up after a restart: it goes on renewing AWS credentials "
            "and the agent's login token") in logs
    wait_for(lambda: f"Session {sid}: AWS credentials renewed\n" in env.daemon.logs()[mark:],
             what="the log line")
    assert "no longer renewed" not in logs and "credentials" not in "".join(
        line for line in logs.splitlines() if "Notification:" in line)
    # the Secret re-applied whole: its labels stay, only the map changed
    sec = env.fk.get("Secret", ns, "aws-sigv4-creds")
    assert sec["metadata"].get("labels") == labels
    assert list(json.loads(base64.b64decode(sec["data"]["creds.json"]))) == [akid]
    # the record follows the renewals, and holds no secret
    text = record.read_text()
    assert json.loads(text)["aws_expires_at"] >= rec["aws_expires_at"]
    assert "SENTINEL" not in text
    assert "SENTINEL" not in env.daemon.logs() and "SENTINEL" not in r.stdout + r.stderr
    lst = env.daemon.client("list", "--json")
    assert "SENTINEL" not in lst.stdout + lst.stderr
    with Rpc(env.daemon.socket) as c:
        assert c.call("session.get", {"id": sid})["state"] == "RUNNING"
    # its end stops them, as for a session the daemon started
    assert env.daemon.client("stop", sid, "--wait").returncode == 0
    wait_for(lambda: env.fk.get("Namespace", None, ns) is None, timeout=30, what="the namespace to go")
    n = len(env.aws_calls.read_text().splitlines())
    import time
    time.sleep(2.5)
    assert len(env.aws_calls.read_text().splitlines()) == n


def test_after_a_restart_a_record_of_an_older_daemon_says_it_no_longer_renews(env):
    import signal
    sid, _ = run_detached(env, "-a", "dev", "--rules", AWS_RULES)
    record = env.tmp / "state" / "uplink" / "sessions" / f"{sid}.json"
    wait_for(lambda: "renews" in json.loads(record.read_text()), what="the record to say what is renewed")
    env.daemon.stop(signal.SIGKILL)
    rec = json.loads(record.read_text())
    for k in ("aws_profiles", "aws_expires_at", "login_expires_at", "exec_refresh_s"):
        del rec[k]
    record.write_text(json.dumps(rec))
    mark = len(env.daemon.logs())
    env.daemon.start()
    wait_for(lambda: f"Session {sid} was picked up after a restart, and these of its credentials are no "
             "longer renewed" in env.daemon.logs()[mark:] and ": AWS credentials, the agent's login token; "
             "they stop working" in env.daemon.logs()[mark:], timeout=30, what="the warning")
    note = "Notification: claude credentials are no longer renewed"
    wait_for(lambda: note in env.daemon.logs()[mark:], what="the notification")
    with Rpc(env.daemon.socket) as c:
        assert c.call("session.get", {"id": sid})["state"] == "RUNNING"
    assert env.daemon.logs()[mark:].count(note) == 1
