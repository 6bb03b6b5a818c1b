"""The Gemini CLI agent: prepare() through agent-probe (as the daemon's thread pool runs it)
against homes made here, the Google token refresh against a local token endpoint, `uplink
rules check gemini ...` against a real uplinkd, `uplink run gemini --dry-run` (the sentinels
of a fake login only in Secrets the mitm mounts; the pod's login parses as the CLI's OAuth
client expects), `uplink doctor`'s gemini line, and the Dockerfile's static properties."""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

from uplinktest import ROOT, Daemon, Env, TokenServer, build_dir

SENTINEL = "uplink-sentinel"
NOW = 1700000000
ACCESS = "ya29.uplink-sentinel-access"
REFRESH = "1//uplink-sentinel-refresh"
ID_TOKEN = "eyJhbGciOi.uplink-sentinel-id.sig"
CLIENT_ID = "681255809395-oo8ft2oprdrnp9e3aqf6av3hmdib135j.apps.googleusercontent.com"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
CONTEXT = ROOT / "agents" / "gemini"


def creds(expiry_ms, refresh=REFRESH):
    d = {"access_token": ACCESS, "scope": SCOPE, "token_type": "Bearer", "id_token": ID_TOKEN,
         "expiry_date": expiry_ms}
    if refresh:
        d["refresh_token"] = refresh
    return d


@pytest.fixture
def home():
    """A home with a Gemini login ending at `expiry_ms` and a settings.json (text)."""
    made = []

    def make(expiry_ms=(NOW + 3600) * 1000, settings=None, login=True, **kw):
        d = Path(tempfile.mkdtemp(prefix="upg-", dir="/tmp"))
        made.append(d)
        (d / ".gemini").mkdir()
        (d / "proj").mkdir()
        if login:
            (d / ".gemini" / "oauth_creds.json").write_text(json.dumps(creds(expiry_ms, **kw)))
            (d / ".gemini" / "oauth_creds.json").chmod(0o600)
        if settings is not None:
            (d / ".gemini" / "settings.json").write_text(settings)
        return d
    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def probe(home, *args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([str(build_dir() / "tests" / "integration" / "agent-probe"), "--agent",
                        "gemini", "--home", str(home), "--cwd", str(home / "proj"), *args],
                       capture_output=True, text=True, timeout=60, env=e)
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


def pod_side(out):
    return json.dumps([out["env"], out["volumes"], out["command"], out["warnings"]])


def volume(out, name):
    return next(v for v in out["volumes"] if v["name"] == name)


@pytest.fixture
def token_server():
    s = TokenServer()
    yield s
    s.close()


NEW = {"access_token": "ya29.uplink-sentinel-new", "expires_in": 3599, "scope": SCOPE,
       "token_type": "Bearer", "id_token": "eyJ.uplink-sentinel-newid.sig"}


# ---------------------------------------------------------------- the Google login

def test_google_login_injected_and_faked_in_the_pod(home):
    h = home()
    rc, out = probe(h, "--now", str(NOW))
    assert rc == 0, out
    rules = json.loads(out["auth_rules"])["rules"]
    bearer = {"headers": {"Authorization": "Bearer " + ACCESS}}
    assert rules == [
        {"name": "gemini-code-assist", "hosts": [r"cloudcode-pa\.googleapis\.com"],
         "methods": ["GET", "POST"], "inject": bearer},
        {"name": "gemini-tokeninfo", "hosts": [r"oauth2\.googleapis\.com"], "methods": ["POST"],
         "paths": ["/tokeninfo"], "inject": bearer},
        {"name": "gemini-userinfo", "hosts": [r"www\.googleapis\.com"], "methods": ["GET"],
         "paths": ["/oauth2/v2/userinfo"], "inject": bearer}]
    assert out["expires_at"] == NOW + 3600
    assert SENTINEL not in pod_side(out)
    # the pod's login: what the CLI's OAuth client reads, never about to expire (it refreshes
    # within 5 minutes of expiry_date), placeholders only, no id_token
    fake = volume(out, "gemini-fake-creds")
    assert fake["kind"] == "secret" and fake["read_only"]
    f = fake["files"][0]
    assert f["mount_path"] == str(h / ".gemini" / "oauth_creds.json")
    doc = json.loads(f["data"])
    assert sorted(doc) == ["access_token", "expiry_date", "refresh_token", "scope", "token_type"]
    assert doc["access_token"].startswith("ya29.uplink-placeholder-")
    assert doc["refresh_token"].startswith("1//uplink-placeholder-")
    assert doc["token_type"] == "Bearer" and doc["scope"] == SCOPE
    assert isinstance(doc["expiry_date"], int)
    assert doc["expiry_date"] > (NOW + 5 * 365 * 86400) * 1000
    assert out["env"]["GOOGLE_GENAI_USE_GCA"] == "true" and "GEMINI_API_KEY" not in out["env"]
    assert out["env"]["UPLINK_AGENT_DIRS"] == ".gemini"
    assert out["env"]["GEMINI_CLI_TRUST_WORKSPACE"] == "true"   # or -p refuses the folder
    assert out["command"] == ["bash", "-lc", "exec gemini --yolo"]
    settings = json.loads(volume(out, "gemini-settings")["files"][0]["data"])
    assert settings["security"]["auth"]["selectedType"] == "oauth-personal"


def test_refresh_expired_token(home, token_server):
    h = home(expiry_ms=(NOW - 60) * 1000)
    token_server.body = NEW
    rc, out = probe(h, "--now", str(NOW), env={"UPLINK_GOOGLE_TOKEN_URL": token_server.url})
    assert rc == 0, out
    # one refresh grant, form-encoded, with the CLI's own OAuth client
    assert len(token_server.requests) == 1
    _, headers, body = token_server.requests[0]
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    form = urllib.parse.parse_qs(body.decode())
    assert form == {"grant_type": ["refresh_token"], "refresh_token": [REFRESH],
                    "client_id": [CLIENT_ID], "client_secret": ["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"]}
    assert "Bearer " + NEW["access_token"] in out["auth_rules"] and ACCESS not in out["auth_rules"]
    assert out["expires_at"] == NOW + 3599
    # the host file as the CLI writes it: the new tokens, the refresh token kept, 0600
    path = h / ".gemini" / "oauth_creds.json"
    saved = json.loads(path.read_text())
    assert saved == {"access_token": NEW["access_token"], "refresh_token": REFRESH,
                     "scope": SCOPE, "token_type": "Bearer", "id_token": NEW["id_token"],
                     "expiry_date": (NOW + 3599) * 1000}
    assert path.stat().st_mode & 0o777 == 0o600
    assert SENTINEL not in pod_side(out)


def test_no_refresh_when_fresh(home, token_server):
    h = home()
    rc, out = probe(h, "--rules-only", "--now", str(NOW),
                    env={"UPLINK_GOOGLE_TOKEN_URL": token_server.url})
    assert rc == 0 and token_server.requests == [] and out["volumes"] == []


def test_refresh_refused_says_what_to_do(home, token_server):
    h = home(expiry_ms=(NOW - 60) * 1000)
    before = (h / ".gemini" / "oauth_creds.json").read_bytes()
    token_server.status = 400
    token_server.body = {"error": "invalid_grant", "error_description": "uplink-sentinel-x"}
    rc, out = probe(h, "--rules-only", "--now", str(NOW),
                    env={"UPLINK_GOOGLE_TOKEN_URL": token_server.url})
    assert rc == 1 and out["code"] == -5
    assert out["error"] == (
        "the Google token in ~/.gemini/oauth_creds.json has expired and refreshing it failed "
        "(%s answered HTTP 400, invalid_grant): log in again by running `gemini` on this "
        "machine (Login with Google), or use --api-key" % token_server.url)
    assert (h / ".gemini" / "oauth_creds.json").read_bytes() == before


def test_refresh_failure_with_time_left_is_a_warning(home, token_server):
    h = home(expiry_ms=(NOW + 100) * 1000)
    token_server.status = 500
    rc, out = probe(h, "--rules-only", "--now", str(NOW),
                    env={"UPLINK_GOOGLE_TOKEN_URL": token_server.url})
    assert rc == 0 and "Bearer " + ACCESS in out["auth_rules"]
    assert "works for 100 more seconds" in out["warnings"][0]


@pytest.mark.parametrize("text, error", [
    (None, "~/.gemini/oauth_creds.json not found: run `gemini` once on this machine and "
           "choose Login with Google, or use --api-key"),
    ("{\"access_token\": \"uplink-sentinel\",", "~/.gemini/oauth_creds.json is not valid JSON"),
    ("{}", "~/.gemini/oauth_creds.json has no 'access_token'"),
    ("{\"access_token\": \"a b uplink-sentinel\"}",
     "~/.gemini/oauth_creds.json: 'access_token' is not a bearer token"),
    ("{\"access_token\": \"ya29.x\"}",
     "~/.gemini/oauth_creds.json has no 'expiry_date' (milliseconds since 1970)"),
])
def test_broken_login(home, text, error):
    h = home(login=False)
    if text is not None:
        (h / ".gemini" / "oauth_creds.json").write_text(text)
    rc, out = probe(h, "--now", str(NOW))
    assert rc == 1 and out["error"].startswith(error), out
    assert SENTINEL not in out["error"]


# ---------------------------------------------------------------- the API key

def test_api_key_mode(home):
    h = home(login=False)
    rc, out = probe(h, "--mode", "api_key", "--now", str(NOW))
    assert rc == 0, out
    assert json.loads(out["auth_rules"])["rules"] == [
        {"name": "gemini-api-key", "hosts": [r"generativelanguage\.googleapis\.com"],
         "methods": ["GET", "POST"],
         "inject": {"headers": {"x-goog-api-key": "{{keyring:gemini:key}}"}}}]
    assert out["expires_at"] == 0
    assert out["env"]["GEMINI_API_KEY"] == "uplink-placeholder-gemini-key"
    assert "GOOGLE_GENAI_USE_GCA" not in out["env"]
    assert all(v["name"] != "gemini-fake-creds" for v in out["volumes"])
    settings = json.loads(volume(out, "gemini-settings")["files"][0]["data"])
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"


# ---------------------------------------------------------------- settings and GEMINI.md

SETTINGS = """{
  // the CLI allows comments: "so // this is no string"
  "security": {"auth": {"selectedType": "vertex-ai", "enforcedType": "vertex-ai"}},
  /* an MCP server with secrets */
  "mcpServers": {"gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "uplink-sentinel-gh",
                                                     "LOG_LEVEL": "debug"},
                        "headers": {"Authorization": "Bearer uplink-sentinel-mcp"},
                        "url": "https://x.example/a//b"}},
  "model": {"name": "gemini-2.5-pro", "sessionTokenLimit": 5000},
  "selectedAuthType": "vertex-ai"
}"""


def test_settings_lose_their_secrets_with_a_warning(home):
    h = home(settings=SETTINGS)
    (h / ".gemini" / "GEMINI.md").write_text("Use tabs.")
    rc, out = probe(h, "--now", str(NOW))
    assert rc == 0, out
    s = json.loads(volume(out, "gemini-settings")["files"][0]["data"])
    assert s["mcpServers"] == {"gh": {"command": "gh-mcp", "env": {"LOG_LEVEL": "debug"},
                                      "headers": {}, "url": "https://x.example/a//b"}}
    assert s["model"] == {"name": "gemini-2.5-pro", "sessionTokenLimit": 5000}
    assert s["security"] == {"auth": {"selectedType": "oauth-personal"}}
    assert "selectedAuthType" not in s
    assert s["general"] == {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}
    assert out["warnings"] == [
        "~/.gemini/settings.json: dropped mcpServers.gh.env.GITHUB_TOKEN from the pod's copy: "
        "it looks like a secret (put it in the keyring and inject it with a rule instead)",
        "~/.gemini/settings.json: dropped mcpServers.gh.headers.Authorization from the pod's "
        "copy: it looks like a secret (put it in the keyring and inject it with a rule instead)"]
    assert SENTINEL not in pod_side(out)
    md = volume(out, "gemini-md")
    assert md["kind"] == "configmap"
    f = md["files"][0]
    assert f["mount_path"] == str(h / ".gemini" / "GEMINI.md")
    assert f["data"].startswith("Use tabs.\n\n## Sandbox\n")
    assert "X-Uplink-Denied: 1" in f["data"] and "denied by uplink" in f["data"]


def test_settings_missing_is_fine_and_broken_is_named(home):
    h = home()
    rc, out = probe(h, "--now", str(NOW))
    assert rc == 0 and out["warnings"] == []
    assert json.loads(volume(out, "gemini-settings")["files"][0]["data"])["security"] == {
        "auth": {"selectedType": "oauth-personal"}}
    (h / ".gemini" / "settings.json").write_text('{\n  "a": "uplink-sentinel",\n  oops\n}')
    rc, out = probe(h, "--now", str(NOW))
    assert rc == 1
    assert out["error"] == ("~/.gemini/settings.json is not valid JSON (line 3, column 6): fix "
                            "it, or move it aside")


def test_passthrough_args_and_shared_folders(home):
    h = home()
    (h / ".gemini" / "commands").mkdir()
    rc, out = probe(h, "--now", str(NOW), "--debug", "--", "-p", "it's $HOME")
    assert rc == 0, out
    assert out["command"] == ["bash", "-lc", "exec gemini --debug --yolo -p 'it'\\''s $HOME'"]
    cmds = volume(out, "gemini-commands")
    assert cmds["read_only"] and cmds["host_path"] == str(h / ".gemini" / "commands")
    assert all(v["name"] != "gemini-extensions" for v in out["volumes"])


# ---------------------------------------------------------------- the daemon

@pytest.fixture
def daemon_for():
    started = []

    def start(h, env=None):
        tmp = Path(tempfile.mkdtemp(prefix="upd-", dir="/tmp"))
        d = Daemon(tmp, env={"HOME": str(h), "UPLINK_DATA_DIR": str(ROOT), **(env or {})}).start()
        started.append((d, tmp))
        return d
    yield start
    for d, tmp in started:
        rc = d.stop()
        logs = d.logs()
        d.close()
        shutil.rmtree(tmp, ignore_errors=True)
        assert rc == 0, logs
        assert SENTINEL not in logs


def test_rules_check_and_render(home, daemon_for):
    h = home(expiry_ms=int((time.time() + 3600) * 1000))
    (h / "keyring.json").write_text(json.dumps({"entries": [
        {"service": "gemini", "username": "key", "value": "AIza-uplink-sentinel-key"}]}))
    d = daemon_for(h, {"UPLINK_SECRET_STORE": "file", "UPLINK_SECRET_FILE": str(h / "keyring.json")})
    url = "https://cloudcode-pa.googleapis.com/v1internal:streamGenerateContent?alt=sse"
    r = d.client("rules", "check", "--json", "gemini", "google", "POST", url)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["decision"] == "allow" and out["rule"]["name"] == "gemini-code-assist"
    assert out["rule"]["layer"] == "auth" and out["rule"]["headers"] == ["Authorization"]
    # google is the default mode
    r = d.client("rules", "check", "--json", "gemini", "POST",
                 "https://oauth2.googleapis.com/tokeninfo")
    assert json.loads(r.stdout)["rule"]["name"] == "gemini-tokeninfo", r.stdout
    # the refresh grant is the host's business, never the pod's
    r = d.client("rules", "check", "--json", "gemini", "google", "POST",
                 "https://oauth2.googleapis.com/token")
    assert json.loads(r.stdout)["decision"] == "deny", r.stdout
    # the agent's defaults come from agents/gemini/default-rules.yaml
    r = d.client("rules", "check", "--json", "gemini", "google", "POST",
                 "https://play.googleapis.com/log?format=json&hasfast=true")
    out = json.loads(r.stdout)
    assert out["rule"]["name"] == "gemini-usage-statistics" and out["rule"]["layer"] == "agent"
    assert out["rule"]["source"] == "agents/gemini/default-rules.yaml:5"
    r = d.client("rules", "check", "--json", "gemini", "api_key", "POST",
                 "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["rule"]["name"] == "gemini-api-key" and out["rule"]["headers"] == ["x-goog-api-key"]
    r = d.client("rules", "check", "--json", "gemini", "api_key", "POST", url)
    assert json.loads(r.stdout)["decision"] == "deny", r.stdout
    r = d.client("rules", "render", "gemini", "google")
    assert r.returncode == 0 and "gemini-code-assist" in r.stdout and SENTINEL not in r.stdout


def test_rules_check_without_a_login(home, daemon_for):
    d = daemon_for(home(login=False))
    r = d.client("rules", "check", "gemini", "google", "POST",
                 "https://cloudcode-pa.googleapis.com/v1internal:loadCodeAssist")
    assert r.returncode == 2
    assert "~/.gemini/oauth_creds.json not found" in r.stderr + r.stdout


# ---------------------------------------------------------------- --dry-run

@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    (e.home / ".gemini").mkdir()
    (e.home / ".gemini" / "oauth_creds.json").write_text(json.dumps(
        creds(int((time.time() + 3600) * 1000))))
    (e.home / ".gemini" / "settings.json").write_text(SETTINGS)
    (e.tmp / "keyring.json").write_text(json.dumps({"entries": [
        {"service": "gemini", "username": "key", "value": "AIza-uplink-sentinel-key"}]}))
    e.daemon.env.update({"UPLINK_SECRET_STORE": "file",
                         "UPLINK_SECRET_FILE": str(e.tmp / "keyring.json")})
    yield from e.running()


def decoded(item):
    data = item.get("data") or {}
    if item["kind"] == "Secret":
        return {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
    return dict(data)


@pytest.mark.parametrize("flag", [None, "--api-key"])
def test_dry_run_keeps_the_login_out_of_the_agent_pod(env, flag):
    r = env.run("gemini", *([flag] if flag else []), "--dry-run", "--show-secrets", check=0)
    items = json.loads(r.stdout)["items"]
    pods = {i["metadata"]["name"]: i for i in items if i["kind"] == "Pod"}
    agent, mitm = pods["agent"], pods["mitm"]

    def mounted(pod, kind, key):
        return {v[kind][key] for v in pod["spec"]["volumes"] if kind in v}
    agent_objs = mounted(agent, "secret", "secretName") | mounted(agent, "configMap", "name")
    mitm_secrets = mounted(mitm, "secret", "secretName")
    holders = [i["metadata"]["name"] for i in items if i["kind"] in ("Secret", "ConfigMap")
               and SENTINEL in json.dumps(decoded(i))]
    assert holders, "the login or the key reaches no mitm Secret"
    assert set(holders) <= mitm_secrets and not set(holders) & agent_objs, holders
    assert SENTINEL not in json.dumps(agent)
    main = next(c for c in agent["spec"]["containers"] if c["name"] == "main")
    assert "/uplink/gemini:ctx-" in main["image"]
    files = {}
    for i in items:
        if i["kind"] in ("Secret", "ConfigMap") and i["metadata"]["name"] in agent_objs:
            files.update(decoded(i))
    if flag is None:
        doc = json.loads(files["oauth_creds.json"])
        assert doc["access_token"].startswith("ya29.uplink-placeholder-")
        assert doc["expiry_date"] > (time.time() + 365 * 86400) * 1000
    else:
        assert "oauth_creds.json" not in files
        envs = {e["name"]: e.get("value") for e in main["env"]}
        assert envs["GEMINI_API_KEY"] == "uplink-placeholder-gemini-key"
    assert "## Sandbox" in files["GEMINI.md"]
    assert "GITHUB_TOKEN" in r.stderr and "dropped" in r.stderr


# ---------------------------------------------------------------- the image

def test_dockerfile():
    text = (CONTEXT / "Dockerfile").read_text()
    assert "FROM node:22-bookworm-slim" in text        # the CLI needs node >= 20
    assert 'npm install -g "@google/gemini-cli@${GEMINI_CLI_VERSION}"' in text
    assert "ARG CACHE_BUST=0" in text and text.index("ARG CACHE_BUST") < text.index("npm install")
    assert "COPY common/entrypoint.sh /usr/local/bin/uplink-entrypoint" in text
    # the tools (and no sudo) from the layers every agent shares, before the CLI
    assert text.index("RUN sh /usr/local/lib/uplink/base.sh") < text.index("npm install")
    assert 'ENTRYPOINT ["/usr/local/bin/uplink-entrypoint"]' in text
    assert "COPY claude/" not in text and "gemini --version" in text
