"""The Codex agent for real: prepare() through agent-probe (the pod's auth.json as codex
parses it, config.toml less its secret-bearing keys, the refresh of a ChatGPT login against
a local token endpoint with the host's auth.json written back as codex writes it), `uplink
run codex --dry-run` (the login's tokens only in the mitm's Secret) and `uplink rules check
codex ...` against a real uplinkd, and the Dockerfile's static properties."""
import base64
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest

from test_agent_claude import probe
from uplinktest import ROOT, Daemon, Env, TokenServer

CONTEXT = ROOT / "agents" / "codex"
ACCESS_SENTINEL = "uplink-sentinel-access"
REFRESH = "uplink-sentinel-refresh-token"
ID_SENTINEL = "uplink-sentinel-idtoken"
ACCOUNT = "acct-uplink-test-1"
API_KEY = "sk-uplink-sentinel-apikey"
NOW = 1700000000


def b64(d):
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


def jwt(claims, sig="sig"):
    return "%s.%s.%s" % (b64({"alg": "RS256"}), b64(claims), sig)


def claims_of(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def access(exp, tag=ACCESS_SENTINEL):
    return jwt({"exp": exp, "tag": tag}, sig=tag)


def write_login(home, exp, **extra):
    d = home / ".codex"
    d.mkdir(parents=True, exist_ok=True)
    doc = {"auth_mode": "chatgpt", "OPENAI_API_KEY": None, "tokens": {
        "id_token": jwt({"email": "me@example.com", "https://api.openai.com/auth": {
            "chatgpt_plan_type": "pro", "chatgpt_account_id": ACCOUNT}}, sig=ID_SENTINEL),
        "access_token": access(exp), "refresh_token": REFRESH, "account_id": ACCOUNT},
        "last_refresh": "2023-11-14T00:00:00Z", **extra}
    (d / "auth.json").write_text(json.dumps(doc, indent=2))
    return d / "auth.json"


CONFIG = """model = "gpt-5-codex"
model_auto_compact_token_limit = 90000
forced_login_method = "api"

[model_providers.corp]
name = "corp"
base_url = "https://llm.example.com/v1"
experimental_bearer_token = "uplink-sentinel-bearer"
http_headers = { "X-Team" = "uplink-sentinel-header" }

[mcp_servers.github]
command = "gh-mcp"
args = [
  "--token-file", "[not a table]",
]
env = { GITHUB_TOKEN = "uplink-sentinel-gh" }

[mcp_servers.github.env]
OTHER = "uplink-sentinel-other"

[mcp_servers.docs]
url = "https://docs.example.com/mcp"
bearer_token_env_var = "DOCS_TOKEN"
note = \"\"\"
experimental_bearer_token = "inside a string, kept"
\"\"\"
"""


@pytest.fixture
def home():
    d = Path(tempfile.mkdtemp(prefix="upc-", dir="/tmp"))
    (d / "proj").mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def volume(out, name):
    return next(v for v in out["volumes"] if v["name"] == name)


def pod_file(out, name):
    return volume(out, name)["files"][0]["data"]


def test_chatgpt_pod_gets_a_fake_login_codex_parses(home):
    write_login(home, NOW + 7 * 86400)
    (home / ".codex" / "config.toml").write_text(CONFIG)
    rc, out, err = probe(home, "--agent", "codex", "--now", str(NOW), "--state",
                         str(home / "state"), extra=["exec", "hi"])
    assert rc == 0, (out, err)
    # the real token, and the account, only in the auth rule
    rule = json.loads(out["auth_rules"])["rules"][0]
    assert rule["hosts"] == ["chatgpt\\.com"] and rule["paths"] == ["/backend-api/.*"]
    assert rule["inject"]["headers"] == {"Authorization": "Bearer " + access(NOW + 7 * 86400),
                                         "ChatGPT-Account-Id": ACCOUNT}
    assert "TRACE" not in rule["methods"]
    assert out["expires_at"] == NOW + 7 * 86400
    pod = json.dumps({k: v for k, v in out.items() if k != "auth_rules"})
    for s in (ACCESS_SENTINEL, REFRESH, ID_SENTINEL, "uplink-sentinel-bearer",
              "uplink-sentinel-header", "uplink-sentinel-gh", "uplink-sentinel-other"):
        assert s not in pod, s
    # the pod's auth.json, shaped as codex's AuthDotJson: JWTs whose payload codex decodes
    auth = json.loads(pod_file(out, "codex-fake-auth"))
    assert volume(out, "codex-fake-auth")["files"][0]["mount_path"] == str(
        home / ".codex" / "auth.json")
    assert auth["auth_mode"] == "chatgpt" and auth["OPENAI_API_KEY"] is None
    t = auth["tokens"]
    assert t["account_id"] == ACCOUNT and t["refresh_token"].startswith("placeholder-")
    assert claims_of(t["access_token"])["exp"] > NOW + 3000 * 86400
    idc = claims_of(t["id_token"])
    assert idc["email"] == "me@example.com"
    assert idc["https://api.openai.com/auth"] == {"chatgpt_plan_type": "pro",
                                                  "chatgpt_account_id": ACCOUNT}
    assert auth["last_refresh"] == "2023-11-14T22:13:20Z"
    # run without asking, the pod being the sandbox; the passthrough arguments after it
    assert out["command"] == ["bash", "-lc",
                              "exec codex --dangerously-bypass-approvals-and-sandbox exec hi"]
    assert out["env"] == {"UPLINK_AGENT_DIRS": ".codex",
                          "CODEX_CA_CERTIFICATE": "/etc/uplink/ca/ca.crt"}
    md = pod_file(out, "codex-agents-md")
    assert "X-Uplink-Denied: 1" in md and "HTTPS_PROXY" in md


def test_config_toml_loses_its_secret_bearing_keys(home):
    write_login(home, NOW + 7 * 86400)
    (home / ".codex" / "config.toml").write_text(CONFIG)
    rc, out, _ = probe(home, "--agent", "codex", "--now", str(NOW))
    assert rc == 0, out
    toml = pod_file(out, "codex-config")
    import tomllib
    doc = tomllib.loads(toml)      # still valid TOML
    assert doc["cli_auth_credentials_store"] == "file"
    assert doc["forced_login_method"] == "chatgpt"       # the mode's, not the host's
    assert doc["check_for_update_on_startup"] is False
    assert doc["projects"] == {str(home): {"trust_level": "trusted"}}     # the cwd: no prompt
    assert doc["model"] == "gpt-5-codex" and doc["model_auto_compact_token_limit"] == 90000
    corp = doc["model_providers"]["corp"]
    assert corp == {"name": "corp", "base_url": "https://llm.example.com/v1"}
    gh = doc["mcp_servers"]["github"]
    assert gh == {"command": "gh-mcp", "args": ["--token-file", "[not a table]"]}
    assert doc["mcp_servers"]["docs"]["bearer_token_env_var"] == "DOCS_TOKEN"
    assert "inside a string, kept" in doc["mcp_servers"]["docs"]["note"]
    assert "uplink-sentinel" not in toml
    w = out["warnings"]
    for key in ("model_providers.corp.experimental_bearer_token",
                "model_providers.corp.http_headers", "mcp_servers.github.env"):
        assert any("~/.codex/config.toml: %s looks like a credential" % key in x for x in w), w
    assert any("the table [mcp_servers.github.env] may hold credentials" in x for x in w), w
    assert len(w) == 4, w


def test_refresh_near_expiry_writes_the_host_file_as_codex_does(home):
    path = write_login(home, NOW + 60)
    s = TokenServer()
    new_access = access(NOW + 864000, tag="uplink-sentinel-new")
    s.body = {"access_token": new_access, "refresh_token": "uplink-sentinel-new-refresh",
              "id_token": jwt({"email": "me@example.com"}, sig="new")}
    try:
        rc, out, err = probe(home, "--agent", "codex", "--now", str(NOW), "--rules-only",
                             env={"UPLINK_OPENAI_TOKEN_URL": s.url})
    finally:
        s.close()
    assert rc == 0, (out, err)
    assert len(s.requests) == 1
    p, headers, body = s.requests[0]
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"client_id": "app_EMoamEEZ73f0CkXaXp7hrann",
                                "grant_type": "refresh_token", "refresh_token": REFRESH}
    rule = json.loads(out["auth_rules"])["rules"][0]
    assert rule["inject"]["headers"]["Authorization"] == "Bearer " + new_access
    assert out["expires_at"] == NOW + 864000
    doc = json.loads(path.read_text())
    assert doc["tokens"]["access_token"] == new_access
    assert doc["tokens"]["refresh_token"] == "uplink-sentinel-new-refresh"
    assert doc["tokens"]["account_id"] == ACCOUNT and doc["auth_mode"] == "chatgpt"
    assert doc["last_refresh"] == "2023-11-14T22:13:20Z"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_refresh_refused_when_expired_says_what_to_do(home):
    write_login(home, NOW - 10)
    s = TokenServer()
    s.status, s.body = 401, {"error": {"code": "refresh_token_reused"}}
    try:
        rc, out, _ = probe(home, "--agent", "codex", "--now", str(NOW), "--rules-only",
                           env={"UPLINK_OPENAI_TOKEN_URL": s.url})
    finally:
        s.close()
    assert rc == 1 and out["code"] == -5
    assert "answered HTTP 401, refresh_token_reused" in out["error"]
    assert "run `codex login` on this machine, or use --api-key" in out["error"]
    assert "sentinel" not in out["error"]


def test_api_key_mode(home):
    rc, out, _ = probe(home, "--agent", "codex", "--mode", "api_key")
    assert rc == 0, out
    rules = json.loads(out["auth_rules"])["rules"]
    assert rules[0]["hosts"] == ["api\\.openai\\.com"]
    assert rules[0]["inject"]["headers"] == {"Authorization": "Bearer {{keyring:openai:key}}"}
    assert rules[1]["paths"] == ["/backend-api/codex/models"] and rules[1]["methods"] == ["GET"]
    auth = json.loads(pod_file(out, "codex-fake-auth"))
    assert auth == {"auth_mode": "apikey", "OPENAI_API_KEY": "placeholder-injected-by-uplink",
                    "tokens": None, "last_refresh": None}
    # auth.json's own key wins over the keyring, and stays out of the pod
    (home / ".codex").mkdir(exist_ok=True)
    (home / ".codex" / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": API_KEY}))
    rc, out, _ = probe(home, "--agent", "codex", "--mode", "api_key")
    assert json.loads(out["auth_rules"])["rules"][0]["inject"]["headers"] == {
        "Authorization": "Bearer " + API_KEY}
    assert API_KEY not in json.dumps({k: v for k, v in out.items() if k != "auth_rules"})


def test_missing_login(home):
    rc, out, _ = probe(home, "--agent", "codex")
    assert rc == 1 and out["error"] == (
        "~/.codex/auth.json not found: run `codex login` on this machine (with "
        "cli_auth_credentials_store = \"file\" in ~/.codex/config.toml), or use --api-key")


# ---------------------------------------------------------------- through the daemon

@pytest.fixture
def codex_env(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    write_login(e.home, int(time.time()) + 7 * 86400)
    (e.home / ".codex" / "config.toml").write_text(CONFIG)
    yield from e.running()


def test_dry_run_keeps_the_tokens_in_the_mitm_secret(codex_env):
    r = codex_env.run("codex", "--dry-run", "--show-secrets", "--image", "example/codex:1",
                      check=0)
    assert r.returncode == 0, (r.stderr, codex_env.daemon.logs()[-2000:])
    items = json.loads(r.stdout)["items"]
    pods = {i["metadata"]["name"]: i for i in items if i["kind"] == "Pod"}

    def mounted(pod):
        names = set()
        for v in pod["spec"].get("volumes", []):
            for k in ("secret", "configMap"):
                if k in v:
                    names.add(v[k].get("secretName") or v[k].get("name"))
            for src in v.get("projected", {}).get("sources", []):
                for k in ("secret", "configMap"):
                    if k in src:
                        names.add(src[k]["name"])
        return names
    agent_reads = mounted(pods["agent"])
    mitm_reads = mounted(pods["mitm"])
    sentinels = (ACCESS_SENTINEL, REFRESH, ID_SENTINEL)
    holders = set()
    for i in items:
        text = json.dumps(i)
        if i["kind"] == "Secret":      # --show-secrets: data base64, as the API holds it
            text += "".join(base64.b64decode(v).decode("utf-8", "replace")
                            for v in (i.get("data") or {}).values())
        if any(s in text for s in sentinels):
            holders.add((i["kind"], i["metadata"]["name"]))
    assert not any(s in json.dumps(pods["agent"]) for s in sentinels)
    for kind, name in holders:
        assert kind == "Secret" and name in mitm_reads and name not in agent_reads, holders
    assert holders, "the real token reached no Secret"
    assert "the table [mcp_servers.github.env] may hold credentials" in r.stderr


@pytest.fixture
def daemon_home(home):
    started = []

    def start():
        tmp = Path(tempfile.mkdtemp(prefix="upd-", dir="/tmp"))
        keyring = tmp / "keyring.json"
        keyring.write_text(json.dumps({"entries": [
            {"service": "openai", "username": "key", "value": API_KEY}]}))
        d = Daemon(tmp, env={"HOME": str(home), "UPLINK_DATA_DIR": str(ROOT),
                             "UPLINK_SECRET_STORE": "file",
                             "UPLINK_SECRET_FILE": str(keyring)}).start()
        started.append((d, tmp))
        return d
    yield start
    for d, tmp in started:
        rc = d.stop()
        logs = d.logs()
        d.close()
        shutil.rmtree(tmp, ignore_errors=True)
        assert rc == 0, logs
        assert "sentinel" not in logs


def test_rules_check_and_render(home, daemon_home):
    write_login(home, int(time.time()) + 7 * 86400)
    d = daemon_home()
    r = d.client("rules", "check", "--json", "codex", "chatgpt", "POST",
                 "https://chatgpt.com/backend-api/codex/responses")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["decision"] == "allow" and out["rule"]["name"] == "codex-chatgpt-auth"
    assert sorted(out["rule"]["headers"]) == ["Authorization", "ChatGPT-Account-Id"]
    assert out["rule"]["source"] == "agent:codex:auth:1"
    # the token goes to the backend's API only, not to chatgpt.com's pages
    r = d.client("rules", "check", "--json", "codex", "chatgpt", "POST", "https://chatgpt.com/x")
    assert r.returncode == 1 and json.loads(r.stdout)["decision"] == "deny"
    r = d.client("rules", "check", "--json", "codex", "api_key", "POST",
                 "https://api.openai.com/v1/responses")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rule"]["name"] == "codex-api-key-auth"
    assert API_KEY not in r.stdout
    r = d.client("rules", "render", "codex")
    assert r.returncode == 0 and "sentinel" not in r.stdout and "codex-chatgpt-auth" in r.stdout


def test_dockerfile_static():
    text = (CONTEXT / "Dockerfile").read_text()
    assert text.startswith("# The Codex agent image")
    assert "FROM node:22-bookworm-slim" in text
    assert 'npm install -g "@openai/codex@${CODEX_VERSION}"' in text
    assert "ARG CACHE_BUST=0" in text and "codex --version" in text
    assert "COPY common/entrypoint.sh /usr/local/bin/uplink-entrypoint" in text
    # the tools (and no sudo) from the layers every agent shares, before the CLI
    assert text.index("RUN sh /usr/local/lib/uplink/base.sh") < text.index("npm install")
    assert "COPY claude/" not in text and 'ENTRYPOINT ["/usr/local/bin/uplink-entrypoint"]' in text
