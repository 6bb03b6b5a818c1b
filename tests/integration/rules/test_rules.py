"""uplink rules check | lint | render against a real uplinkd and a real Secret Service."""
import json
import subprocess
import time
from pathlib import Path

import pytest

from uplinktest import RpcError, uplink_bin

SRC = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((SRC / "examples" / "rules").glob("*.yaml"))
SECRET = "uplink-sentinel-py-keyring"


def header_rule(value, name="api", host=r"api\.example\.com"):
    return (f"rules:\n  - name: {name}\n    hosts: ['{host}']\n    methods: [POST]\n"
            f"    inject:\n      headers:\n        Authorization: '{value}'\n")


def test_python_keyring_value_resolves(rules_daemon, keyring, rules_file):
    keyring.set("PySvc", "py:user", SECRET)
    f = rules_file(header_rule("Bearer {{keyring:PySvc:py:user}}"))
    r = rules_daemon.client("rules", "render", "--rules", str(f), "--show-secrets")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["version"] == 1
    assert doc["rules"][0]["inject"]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert doc["rules"][0]["source"] == f"{f}:2"
    assert doc["rules"][-1]["name"] == "default-readonly"
    # redacted unless asked
    r = rules_daemon.client("rules", "render", "--rules", str(f))
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout
    assert json.loads(r.stdout)["rules"][0]["inject"]["headers"]["Authorization"] == "<redacted>"
    # check names the header, never its value
    r = rules_daemon.client("rules", "check", "--rules", str(f), "POST",
                            "https://api.example.com/v1/x?y=1")
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout + r.stderr
    assert "rule:   api" in r.stdout and "layer:  user" in r.stdout
    assert f"source: {f}:2" in r.stdout and "inject: Authorization" in r.stdout


def test_secret_tool_entry_resolves(rules_daemon, keyring, rules_file):
    keyring.py("import subprocess; subprocess.run(['secret-tool', 'store', '--label=x', 'service',"
               " 'St', 'username', 'u'], input=b'uplink-sentinel-st', check=True)")
    f = rules_file(header_rule("{{keyring:St:u}}"))
    r = rules_daemon.client("rules", "render", "--rules", str(f), "--show-secrets")
    assert r.returncode == 0, r.stderr
    assert '"Authorization": "uplink-sentinel-st"' in r.stdout


def test_missing_entry(rules_daemon, rules_file):
    f = rules_file(header_rule("Bearer {{keyring:NoSuchSvc:nobody}}"))
    r = rules_daemon.client("rules", "check", "--rules", str(f), "POST", "https://api.example.com/")
    assert r.returncode == 2
    assert r.stderr == (
        f"uplink: rule 'api' ({f}:2), header 'Authorization': keyring entry not found: "
        "service='NoSuchSvc' username='nobody'; create it with: keyring set 'NoSuchSvc' 'nobody'"
        "  (or: secret-tool store --label=uplink service 'NoSuchSvc' username 'nobody')\n")


def test_keyring_value_is_never_rescanned(rules_daemon, keyring, rules_file, tmp_path):
    marker = tmp_path / "exec-ran"
    keyring.set("Tricky", "u", f"{{{{exec:touch {marker}}}}}")
    f = rules_file(header_rule("{{keyring:Tricky:u}}"))
    r = rules_daemon.client("rules", "render", "--rules", str(f), "--allow-exec", "--show-secrets")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rules"][0]["inject"]["headers"]["Authorization"] == \
        f"{{{{exec:touch {marker}}}}}"
    assert not marker.exists()


def test_exec_placeholders(rules_daemon, rules_file):
    f = rules_file(header_rule("Bearer {{exec:echo '' uplink-sentinel-exec ''}}"))
    r = rules_daemon.client("rules", "check", "--rules", str(f), "POST", "https://api.example.com/")
    assert r.returncode == 2
    assert "re-run with --allow-exec" in r.stderr
    r = rules_daemon.client("rules", "render", "--rules", str(f), "--allow-exec", "--show-secrets")
    assert r.returncode == 0, r.stderr
    assert '"Bearer uplink-sentinel-exec"' in r.stdout
    f = rules_file(header_rule("{{exec:echo oops >&2; exit 7}}"))
    r = rules_daemon.client("rules", "check", "--allow-exec", "--rules", str(f), "POST",
                            "https://api.example.com/")
    assert r.returncode == 2
    assert "exec placeholder failed (exit 7): 'echo oops >&2; exit 7': oops" in r.stderr
    f = rules_file(header_rule("{{exec:yes}}"))
    r = rules_daemon.client("rules", "check", "--allow-exec", "--rules", str(f), "POST",
                            "https://api.example.com/")
    assert r.returncode == 2
    assert "exec placeholder printed more than 16384 bytes: 'yes'" in r.stderr


def test_exec_child_dies_with_its_client(rules_daemon, rules_file):
    """A client that goes away mid-resolution: the command is killed, the daemon lives on."""
    f = rules_file(header_rule("{{exec:sleep 29.5}}"))
    with rules_daemon.rpc() as c:
        c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "rules.render", "params": {
            "rules": [str(f)], "allow_exec": True}}).encode() + b"\n")
        time.sleep(0.5)
        assert sleeping("29.5")
    deadline = time.time() + 10
    while sleeping("29.5") and time.time() < deadline:
        time.sleep(0.05)
    assert not sleeping("29.5")
    assert rules_daemon.answers()


def sleeping(arg):
    for p in Path("/proc").iterdir():
        try:
            if (p / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", arg.encode()]:
                return True
        except OSError:
            pass
    return False


def test_check_decisions_and_exit_codes(rules_daemon, rules_file):
    f = rules_file("rules:\n"
                   "  - name: api\n    host: 'api\\.example\\.com'\n    methods: [POST]\n"
                   "    paths: ['/v1/.*']\n"
                   "  - name: tcp\n    l4_forward: true\n    hosts: ['db\\.example\\.com']\n")
    c = rules_daemon.client
    r = c("rules", "check", "--rules", str(f), "POST", "https://API.example.com:8443/v1/x?q=1")
    assert r.returncode == 0 and r.stdout.startswith("allow  POST api.example.com/v1/x?q=1\n")
    r = c("rules", "check", "--rules", str(f), "POST", "https://api.example.com.evil.net/v1/x")
    assert r.returncode == 1 and r.stdout.startswith("deny   POST api.example.com.evil.net/v1/x\n")
    assert "hosts: ['api\\.example\\.com\\.evil\\.net']" in r.stdout
    r = c("rules", "check", "--rules", str(f), "GET", "https://anything.example.org/")
    assert r.returncode == 0 and "layer:  generic" in r.stdout
    r = c("rules", "check", "--rules", str(f), "--no-default-rules", "GET", "https://x.org/")
    assert r.returncode == 1
    r = c("rules", "check", "--rules", str(f), "--json", "GET", "https://db.example.com/")
    assert r.returncode == 0
    out = json.loads(r.stdout)
    assert out["decision"] == "l4" and out["rule"]["name"] == "tcp"
    assert out["rule"]["source"] == f"{f}:6"
    r = c("rules", "check", "--rules", str(f), "get", "https://x.org/")
    assert r.returncode == 2 and "method 'get' is not an uppercase HTTP verb" in r.stderr
    r = c("rules", "check", "--rules", str(f), "GET", "ftp://x.org/")
    assert r.returncode == 2 and "the URL must start with http:// or https://" in r.stderr
    r = c("rules", "check", "GET")
    assert r.returncode == 2


def test_relative_rules_path(rules_daemon, rules_file):
    f = rules_file("rules:\n  - name: rel\n    hosts: [x]\n")
    e = dict(rules_daemon.env)
    r = subprocess.run([uplink_bin(), "rules", "check", "--rules", f.name, "PUT", "http://x/"],
                       cwd=f.parent, env=e, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert f"source: {f.name}:2" in r.stdout


def test_agent_layers(rules_daemon, keyring, rules_file):
    keyring.set("bedrock", "key", "uplink-sentinel-bedrock")
    f = rules_file("rules:\n  - name: aws\n    hosts: ['.*\\.amazonaws\\.com']\n")
    r = rules_daemon.client("rules", "check", "--rules", str(f), "--json", "claude", "bedrock",
                            "POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/x/invoke")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["rule"]["name"] == "bedrock-auth" and out["rule"]["layer"] == "auth"
    assert out["rule"]["headers"] == ["Authorization"]
    assert "uplink-sentinel" not in r.stdout
    r = rules_daemon.client("rules", "check", "--rules", str(f), "claude", "bedrock",
                            "POST", "https://x.datadoghq.com/api/v2/logs")
    assert r.returncode == 0 and "layer:  agent" in r.stdout
    r = rules_daemon.client("rules", "check", "nosuchagent", "GET", "https://x/")
    assert r.returncode == 2 and "unknown agent 'nosuchagent'" in r.stderr


def test_lint(rules_daemon, rules_file):
    good = rules_file("rules:\n  - name: ok\n    hosts: [x]\n")
    bad = rules_file("rules:\n  - name: a\n    hosts: [x]\n    method: [GET]\n"
                     "  - hosts: ['(']\n    paths: []\n")
    r = rules_daemon.client("rules", "lint", str(good))
    assert r.returncode == 0 and r.stdout == f"{good}: ok, 1 rules\n"
    r = rules_daemon.client("rules", "lint", str(good), str(bad), "/nonexistent.yaml")
    assert r.returncode == 1
    assert r.stdout == (
        f"{good}: ok, 1 rules\n"
        f"{bad}:4:5: rule 'a': unknown key 'method'; did you mean 'methods'?\n"
        f"{bad}:5:13: rule #2 (unnamed): invalid host regex '(': missing closing parenthesis at offset 1\n"
        f"{bad}:6:12: rule #2 (unnamed): 'paths' is an empty list, which would match no path; "
        "omit 'paths' entirely to allow any path\n"
        "/nonexistent.yaml: cannot read the rules file: No such file or directory\n")
    r = rules_daemon.client("rules", "check", "--rules", str(bad), "GET", "https://x/")
    assert r.returncode == 2 and "did you mean 'methods'?" in r.stderr


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_examples_lint_clean(rules_daemon, example):
    r = rules_daemon.client("rules", "lint", str(example))
    assert r.returncode == 0, r.stdout + r.stderr


def test_git_example_allows_smart_http_only(rules_daemon, keyring):
    keyring.set("git-https", "github.com", "dXNlcjp1cGxpbmstc2VudGluZWwtZ2l0")
    git = str(SRC / "examples" / "rules" / "git.yaml")
    base = "https://github.com/o/r.git"
    for method, url in (("GET", f"{base}/info/refs?service=git-upload-pack"),
                        ("POST", f"{base}/git-upload-pack"),
                        ("GET", f"{base}/info/refs?service=git-receive-pack"),
                        ("POST", f"{base}/git-receive-pack")):
        r = rules_daemon.client("rules", "check", "--rules", git, "--json", method, url)
        assert r.returncode == 0, (method, url, r.stdout, r.stderr)
        assert json.loads(r.stdout)["rule"]["headers"] == ["Authorization"]
    r = rules_daemon.client("rules", "check", "--rules", git, "POST", "https://github.com/o/r/issues")
    assert r.returncode == 1


def test_params_are_checked(rules_daemon):
    with rules_daemon.rpc() as c:
        with pytest.raises(RpcError) as e:
            c.call("rules.check", {"method": "GET", "url": "https://x/", "bogus": 1})
        assert "bogus" in str(e.value)
        with pytest.raises(RpcError) as e:
            c.call("rules.render", {"rules": ["/nonexistent"]})
        assert e.value.name == "RULES_INVALID"
        assert e.value.error["message"] == \
            "/nonexistent: cannot read the rules file: No such file or directory"
        with pytest.raises(RpcError) as e:
            c.call("rules.lint", {})
        assert e.value.name == "INVALID_PARAMS" and "files" in e.value.error["message"]


def test_render_is_what_the_addon_reads(rules_daemon, keyring, rules_file):
    """The addon's own parser (manifests/mitm/filter.py) takes what render prints."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("uplink_filter", SRC / "manifests" / "mitm" / "filter.py")
    if spec is None or not (SRC / "manifests" / "mitm" / "filter.py").exists():
        pytest.skip("the addon is not in this tree")
    addon = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(addon)
    keyring.set("atlassian", "basic", "dXNlcjp1cGxpbmstc2VudGluZWwtYQ==")
    keyring.set("gitlab", "token", "uplink-sentinel-gitlab")
    keyring.set("git-https", "github.com", "dXNlcjp1cGxpbmstc2VudGluZWwtZ2l0")
    keyring.set("bedrock", "key", "uplink-sentinel-bedrock")
    args = []
    for name in ("atlassian", "gitlab", "git", "l4-passthrough"):
        args += ["--rules", str(SRC / "examples" / "rules" / f"{name}.yaml")]
    r = rules_daemon.client("rules", "render", *args, "--show-secrets", "claude", "bedrock")
    assert r.returncode == 0, r.stderr
    rs = addon.parse_rules(r.stdout)
    names = [x.name for x in rs.rules]
    assert names[0] == "bedrock-auth" and names[-2:] == ["claude-logs", "default-readonly"]
    v = rs.evaluate("POST", "https", "gitlab.com", "/api/v4/projects")
    assert v.decision == "allow" and v.rule.name == "gitlab-api"
    assert v.rule.headers == (("PRIVATE-TOKEN", "uplink-sentinel-gitlab"),)
    assert rs.evaluate("GET", "https", "db.staging.example.com", "/").decision == "l4"
    assert rs.evaluate("POST", "https", "evil.example", "/").decision == "deny"


def test_check_denies_a_credential_over_plain_http(rules_daemon, rules_file):
    f = rules_file("rules:\n  - name: api\n    hosts: ['api\\.example\\.com']\n"
                   "    inject:\n      headers:\n        X-Key: plain-value\n")
    r = rules_daemon.client("rules", "check", "--rules", str(f), "GET", "http://api.example.com/v1")
    assert r.returncode == 1, r.stdout
    assert r.stdout == ("deny   GET api.example.com/v1\n  rule 'api' injects credentials, which uplink "
                        "sends only over HTTPS; use https://api.example.com/v1\n")
    r = rules_daemon.client("rules", "check", "--rules", str(f), "GET", "https://api.example.com/v1")
    assert r.returncode == 0 and r.stdout.startswith("allow  GET api.example.com/v1\n")


KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster:
    server: https://api.dev.test:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkZBS0UtQ0EKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=
users:
- name: bot
  user:
    token: uplink-sentinel-kube-token
contexts:
- name: dev
  context: {cluster: dev, user: bot}
"""


def test_check_takes_kube_contexts_and_ports(rules_daemon, tmp_path):
    """rules check gives the kube rules a session with --kube-context gets, and decides on
    the URL's port as the proxy does: the token goes to the API server's port alone."""
    kc = tmp_path / "kubeconfig"
    kc.write_text(KUBECONFIG)
    c = rules_daemon.client
    kube = ["--kube-context", "dev", "--kubeconfig", str(kc)]
    r = c("rules", "check", *kube, "--json", "DELETE", "https://api.dev.test:6443/api/v1/x")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["decision"], out["port"]) == ("allow", 6443)
    assert (out["rule"]["name"], out["rule"]["layer"]) == ("kube-dev", "kube")
    assert out["rule"]["headers"] == ["Authorization"] and out["rule"]["source"] == "kubeconfig:dev"
    assert "uplink-sentinel" not in r.stdout + r.stderr
    r = c("rules", "check", *kube, "DELETE", "https://api.dev.test/api/v1/x")  # port 443
    assert r.returncode == 1 and r.stdout.startswith("deny   DELETE api.dev.test/api/v1/x\n")
    r = c("rules", "check", *kube, "GET", "https://api.dev.test:8443/api/v1/x")
    assert r.returncode == 0 and "layer:  generic" in r.stdout and "inject" not in r.stdout
    r = c("rules", "check", "DELETE", "https://api.dev.test:6443/api/v1/x")  # no context
    assert r.returncode == 1
    r = c("rules", "check", "--kube-context", "nosuch", "--kubeconfig", str(kc), "GET",
          "https://api.dev.test:6443/")
    assert r.returncode == 2 and "--kube-context nosuch:" in r.stderr
    r = c("rules", "check", "GET", "https://api.dev.test:99999/")
    assert r.returncode == 2 and "the port must be a number from 1 to 65535" in r.stderr


def test_check_says_which_rules_resign_aws(rules_daemon):
    aws = str(SRC / "examples" / "rules" / "aws.yaml")
    r = rules_daemon.client("rules", "check", "--rules", aws, "POST", "https://sts.amazonaws.com/")
    assert r.returncode == 0 and "rule:   aws-sts" in r.stdout
    assert "aws:    requests signed with the agent's dummy AWS keys are re-signed" in r.stdout
    r = rules_daemon.client("rules", "check", "--rules", aws, "--json", "GET",
                            "https://abc.execute-api.us-east-1.amazonaws.com/prod/")
    out = json.loads(r.stdout)
    assert out["rule"]["layer"] == "generic" and out["rule"]["aws_sign"] is False
    # over plain http the proxy re-signs nothing (the signature and token would go in clear)
    r = rules_daemon.client("rules", "check", "--rules", aws, "--json", "POST",
                            "http://sts.amazonaws.com/")
    out = json.loads(r.stdout)
    assert out["rule"]["name"] == "aws-sts" and out["rule"]["aws_sign"] is False
