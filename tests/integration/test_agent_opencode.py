"""The OpenCode agent for real: its OAuth logins refreshed against a local token endpoint
(through agent-probe, which runs the agent's prepare() as the daemon's thread pool does)
and written back as opencode writes auth.json, `uplink rules check opencode MODE ...` and
`rules render` against a real uplinkd, `uplink run opencode --dry-run` (the real daemon and
client against the fake API server): the real credential only in the mitm's rules Secret,
never in an object the agent pod reads, and the pod's auth.json as opencode parses it; and
the Dockerfile's static properties (`docker build` needs the network: tests/e2e builds it).
"""
import base64
import json
import os
import shutil
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

from uplinktest import ROOT, Daemon, Env, TokenServer, build_dir, wait_for  # noqa: F401

CONTEXT = ROOT / "agents" / "opencode"
SENTINEL = "uplink-sentinel"
NOW = 1700000000
AUTH = Path(".local/share/opencode/auth.json")
ANTHROPIC_CLIENT = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
OPENAI_CLIENT = "app_EMoamEEZ73f0CkXaXp7hrann"
LOGINS = {
    "anthropic": {"type": "oauth", "refresh": "sk-ant-ort01-uplink-sentinel-old",
                  "access": "sk-ant-oat01-uplink-sentinel-old", "expires": (NOW + 60) * 1000},
    "openai": {"type": "oauth", "refresh": "rt_uplink-sentinel-old",
               "access": "at-uplink-sentinel-old", "expires": (NOW - 60) * 1000,
               "accountId": "acct-old"},
    "github-copilot": {"type": "oauth", "refresh": "gho_uplink-sentinel", "access": "x",
                       "expires": 0},
}


def probe(home, *args, env=None):
    import subprocess
    e = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    e.update(env or {})
    r = subprocess.run([str(build_dir() / "tests" / "integration" / "agent-probe"),
                        "--agent", "opencode", "--home", str(home), *args],
                       capture_output=True, text=True, timeout=60, env=e)
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


@pytest.fixture
def home():
    d = Path(tempfile.mkdtemp(prefix="upo-", dir="/tmp"))
    (d / AUTH).parent.mkdir(parents=True)
    (d / AUTH).write_text(json.dumps(LOGINS, indent=2))
    (d / AUTH).chmod(0o600)
    (d / "proj").mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def token_server():
    s = TokenServer()
    yield s
    s.close()


def jwt(claims):
    part = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return "eyJhbGciOiJub25lIn0.%s.sig" % part


# ---------------------------------------------------------------- OAuth refresh

def test_anthropic_oauth_refreshed_as_opencode_does(home, token_server):
    token_server.body = {"access_token": "sk-ant-oat01-uplink-sentinel-new",
                         "refresh_token": "sk-ant-ort01-uplink-sentinel-newr",
                         "expires_in": 28800, "token_type": "Bearer"}
    rc, out = probe(home, "--rules-only", "--now", str(NOW),
                    env={"UPLINK_ANTHROPIC_TOKEN_URL": token_server.url})
    assert rc == 0, out
    # one refresh grant: opencode-anthropic-auth's JSON body, client id and old token
    assert len(token_server.requests) == 1
    _, headers, body = token_server.requests[0]
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"grant_type": "refresh_token", "client_id": ANTHROPIC_CLIENT,
                                "refresh_token": LOGINS["anthropic"]["refresh"]}
    rules = json.loads(out["auth_rules"])["rules"]
    assert rules == [{"name": "opencode-auth", "hosts": [r"api\.anthropic\.com"],
                      "methods": ["GET", "HEAD", "POST", "DELETE"],
                      "inject": {"headers": {
                          "Authorization": "Bearer sk-ant-oat01-uplink-sentinel-new",
                          "anthropic-beta": "oauth-2025-04-20,interleaved-thinking-2025-05-14"}}}]
    assert out["expires_at"] == NOW + 28800
    # the host file: the entry replaced as opencode's client.auth.set writes it, the other
    # providers untouched, still 0600, two-space JSON
    text = (home / AUTH).read_text()
    saved = json.loads(text)
    assert saved["anthropic"] == {"type": "oauth", "refresh": "sk-ant-ort01-uplink-sentinel-newr",
                                  "access": "sk-ant-oat01-uplink-sentinel-new",
                                  "expires": (NOW + 28800) * 1000}
    assert saved["openai"] == LOGINS["openai"] and saved["github-copilot"] == LOGINS["github-copilot"]
    assert text.startswith('{\n  "')
    assert (home / AUTH).stat().st_mode & 0o777 == 0o600


def test_chatgpt_login_refreshed_as_opencode_does(home, token_server):
    token_server.body = {"access_token": "at-uplink-sentinel-new",
                         "refresh_token": "rt_uplink-sentinel-new",
                         "id_token": jwt({"https://api.openai.com/auth":
                                          {"chatgpt_account_id": "acct-new"}})}
    rc, out = probe(home, "--mode", "openai", "--cwd", str(home / "proj"), "--now", str(NOW),
                    env={"UPLINK_OPENAI_TOKEN_URL": token_server.url})
    assert rc == 0, out
    _, headers, body = token_server.requests[0]
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert urllib.parse.parse_qs(body.decode()) == {
        "grant_type": ["refresh_token"], "refresh_token": [LOGINS["openai"]["refresh"]],
        "client_id": [OPENAI_CLIENT]}
    rule = json.loads(out["auth_rules"])["rules"][0]
    assert rule["hosts"] == [r"chatgpt\.com"] and rule["paths"] == ["/backend-api/codex/.*"]
    assert rule["inject"]["headers"] == {"Authorization": "Bearer at-uplink-sentinel-new",
                                         "ChatGPT-Account-Id": "acct-new"}
    # no expires_in: opencode takes an hour
    assert out["expires_at"] == NOW + 3600
    saved = json.loads((home / AUTH).read_text())["openai"]
    assert saved == {"type": "oauth", "refresh": "rt_uplink-sentinel-new",
                     "access": "at-uplink-sentinel-new", "expires": (NOW + 3600) * 1000,
                     "accountId": "acct-new"}
    # the pod: a fake ChatGPT login, no real token, no account id
    pod = json.dumps([out["env"], out["volumes"], out["command"], out["warnings"]])
    assert SENTINEL not in pod and "acct-new" not in pod
    fake = next(v for v in out["volumes"] if v["name"] == "opencode-fake-auth")
    doc = json.loads(fake["files"][0]["data"])
    assert list(doc) == ["openai"] and doc["openai"]["type"] == "oauth"
    assert doc["openai"]["expires"] > (NOW + 3000 * 86400) * 1000


def test_refresh_refused_keeps_the_host_file(home, token_server):
    before = (home / AUTH).read_bytes()
    token_server.status = 400
    token_server.body = {"error": "invalid_grant", "error_description": SENTINEL}
    rc, out = probe(home, "--mode", "openai", "--rules-only", "--now", str(NOW),
                    env={"UPLINK_OPENAI_TOKEN_URL": token_server.url})
    assert rc == 1 and out["code"] == -5
    assert out["error"] == (
        "opencode's OpenAI login in ~/.local/share/opencode/auth.json has expired and "
        "refreshing it failed (%s answered HTTP 400, invalid_grant): run `opencode auth login` "
        "on this machine" % token_server.url)
    assert (home / AUTH).read_bytes() == before


def test_refresh_fails_before_expiry_warns(home, token_server):
    token_server.status = 500
    rc, out = probe(home, "--rules-only", "--now", str(NOW),
                    env={"UPLINK_ANTHROPIC_TOKEN_URL": token_server.url})
    assert rc == 0, out
    assert out["warnings"] == [
        "refreshing opencode's Anthropic login failed (%s answered HTTP 500); the current "
        "token works for 60 more seconds: run `opencode auth login` on this machine to renew "
        "it" % token_server.url]
    assert out["expires_at"] == NOW + 60


# ---------------------------------------------------------------- rules check and render

@pytest.fixture
def daemon(home):
    tmp = Path(tempfile.mkdtemp(prefix="upd-", dir="/tmp"))
    (home / AUTH).write_text(json.dumps({
        "anthropic": {"type": "api", "key": "sk-ant-api03-uplink-sentinel"},
        "openai": {"type": "api", "key": "sk-proj-uplink-sentinel"}}))
    d = Daemon(tmp, env={"HOME": str(home), "UPLINK_DATA_DIR": str(ROOT)}).start()
    yield d
    rc = d.stop()
    logs = d.logs()
    d.close()
    shutil.rmtree(tmp, ignore_errors=True)
    assert rc == 0, logs
    assert SENTINEL not in logs


def test_rules_check_and_render(daemon):
    d = daemon
    r = d.client("rules", "check", "opencode", "anthropic", "POST",
                 "https://api.anthropic.com/v1/messages")
    assert r.returncode == 0, r.stderr
    assert "rule:   opencode-auth" in r.stdout and "layer:  auth" in r.stdout
    assert "inject: x-api-key" in r.stdout
    assert SENTINEL not in r.stdout + r.stderr
    r = d.client("rules", "check", "--json", "opencode", "openai", "POST",
                 "https://api.openai.com/v1/responses")
    out = json.loads(r.stdout)
    assert out["decision"] == "allow" and out["rule"]["headers"] == ["Authorization"]
    assert out["rule"]["source"] == "agent:opencode:auth:1"
    # each mode names its own host only
    r = d.client("rules", "check", "--json", "opencode", "anthropic", "POST",
                 "https://api.openai.com/v1/responses")
    assert json.loads(r.stdout)["decision"] == "deny"
    # models.opencode.ai is not needed (the bundled model list is used): no rule of the
    # agent names it; only the generic read-only rule would let its GET through
    r = d.client("rules", "check", "--json", "opencode", "anthropic", "GET",
                 "https://models.opencode.ai/api.json")
    assert json.loads(r.stdout)["rule"]["layer"] == "generic"
    for mode in ("anthropic", "openai"):
        r = d.client("rules", "render", "opencode", mode)
        assert r.returncode == 0 and "opencode-auth" in r.stdout and SENTINEL not in r.stdout
    r = d.client("rules", "check", "opencode", "bedrock", "GET", "https://x/")
    assert r.returncode == 2 and "agent opencode has no mode 'bedrock'" in r.stderr


def test_rules_check_without_a_login(daemon, home):
    (home / AUTH).unlink()
    r = daemon.client("rules", "check", "opencode", "anthropic", "POST",
                      "https://api.anthropic.com/v1/messages")
    assert r.returncode == 2
    assert r.stderr == ("uplink: ~/.local/share/opencode/auth.json not found: run `opencode "
                        "auth login` on this machine and log in\n")


# ---------------------------------------------------------------- --dry-run

@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    yield from e.running()


def secret_text(o):
    """A Secret's data decoded (a ConfigMap's as it is)."""
    data = o.get("data") or {}
    if o["kind"] != "Secret":
        return data
    assert all(not v.startswith("<redacted") for v in data.values()), data
    return {k: base64.b64decode(v).decode("latin-1") for k, v in data.items()}


def mounted_objects(items):
    """The Secrets and ConfigMaps the agent pod mounts: what the agent can read."""
    pod = next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == "agent")
    names = {("Secret", v["secret"]["secretName"]) for v in pod["spec"]["volumes"] if "secret" in v}
    names |= {("ConfigMap", v["configMap"]["name"]) for v in pod["spec"]["volumes"]
              if "configMap" in v}
    return pod, [i for i in items if (i["kind"], i["metadata"]["name"]) in names]


@pytest.mark.parametrize("mode, login, real", [
    ("anthropic", {"type": "api", "key": "sk-ant-api03-uplink-sentinel-k"}, "sk-ant-api03-"),
    ("anthropic", dict(LOGINS["anthropic"], expires=int(time.time() + 86400) * 1000),
     "sk-ant-oat01-"),
    ("openai", {"type": "api", "key": "sk-proj-uplink-sentinel-k"}, "sk-proj-"),
    ("openai", dict(LOGINS["openai"], expires=int(time.time() + 86400) * 1000), "at-"),
])
def test_dry_run_keeps_the_login_in_the_mitm(env, mode, login, real):
    (env.home / AUTH).parent.mkdir(parents=True)
    (env.home / AUTH).write_text(json.dumps({mode: login}))
    r = env.run("opencode", "--" + mode, "--dry-run", "--show-secrets", "--", "run", "hi",
                check=0)
    items = json.loads(r.stdout)["items"]
    pod, mounted = mounted_objects(items)
    # the real credential is in the mitm's rules Secret (shown with --show-secrets), which the agent pod does not mount
    holders = [i["metadata"]["name"] for i in items if i["kind"] == "Secret"
               and SENTINEL in json.dumps(secret_text(i))]
    assert holders == ["rules-json"], holders
    assert SENTINEL not in json.dumps(pod)
    for o in mounted:
        assert SENTINEL not in json.dumps(o) + json.dumps(secret_text(o)), o["metadata"]["name"]
    # the pod's auth.json: only this provider, shaped as opencode parses it, placeholders
    fake = next(o for o in mounted if o["metadata"]["name"] == "opencode-fake-auth")
    doc = json.loads(secret_text(fake)["auth.json"])
    assert list(doc) == [mode] and doc[mode]["type"] == login["type"]
    if login["type"] == "api":
        assert set(doc[mode]) == {"type", "key"}
        assert doc[mode]["key"].startswith("uplink-placeholder-")
    else:
        assert set(doc[mode]) == {"type", "refresh", "access", "expires"}
        assert isinstance(doc[mode]["expires"], int)
        assert doc[mode]["access"].startswith("uplink-placeholder-")
    main = next(c for c in pod["spec"]["containers"] if c["name"] == "main")
    mounts = {m["mountPath"] for m in main["volumeMounts"]}
    assert str(env.home / AUTH) in mounts
    assert str(env.home / ".config/opencode/opencode.json") in mounts
    assert str(env.home / ".config/opencode/AGENTS.md") in mounts
    penv = {e["name"]: e.get("value") for e in main["env"]}
    assert penv["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    assert "HTTPS_PROXY" in penv and "NODE_EXTRA_CA_CERTS" in penv and "SSL_CERT_FILE" in penv


# ---------------------------------------------------------------- the image

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
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1] if " " in ln else "")
            for ln in lines]


def test_dockerfile_static():
    ins = dockerfile()
    kinds = [k for k, _ in ins]
    assert ins[0] == ("FROM", "node:22-bookworm-slim")
    runs = " ".join(a for k, a in ins if k == "RUN")
    # the tools (and no sudo) come from common/base.sh, the layers every agent shares
    assert runs.startswith("sh /usr/local/lib/uplink/base.sh")
    assert 'npm install -g "opencode-ai@${OPENCODE_VERSION}"' in runs
    assert "opencode --version" in runs
    bust = next(i for i, (k, a) in enumerate(ins) if k == "ARG" and a.startswith("CACHE_BUST"))
    npm = next(i for i, (k, a) in enumerate(ins) if k == "RUN" and "opencode-ai" in a)
    assert bust < npm
    copies = [a.split() for k, a in ins if k in ("COPY", "ADD")]
    assert ["common/entrypoint.sh", "/usr/local/bin/uplink-entrypoint"] in copies
    assert copies[0] == ["common/base.sh", "/usr/local/lib/uplink/base.sh"]
    for src, _ in copies:
        assert src.split("/")[0] in ("common", "opencode"), src
        assert (ROOT / "agents" / src).is_file(), src
    assert ("ENTRYPOINT", '["/usr/local/bin/uplink-entrypoint"]') in ins
    assert not any(k == "USER" for k in kinds)


def test_default_rules_name_no_host():
    import yaml
    doc = yaml.safe_load((CONTEXT / "default-rules.yaml").read_text())
    assert doc == {"rules": []}
