"""Config files (.uplink.yaml, 0.4.1's .agent-uplink.yaml, ~/.config/uplink/config.yaml):
`uplink config show`, and a session picking its options up from them."""

import base64
import json
import subprocess
from datetime import datetime

import pytest

from uplinktest import Env, uplink_bin


@pytest.fixture
def env(tmpdir_short, fakekube, registry):  # noqa: F811
    e = Env(tmpdir_short, fakekube, registry)
    e.xdg = tmpdir_short / "xdg"
    (e.xdg / "uplink").mkdir(parents=True)
    e.daemon.env["XDG_CONFIG_HOME"] = str(e.xdg)
    yield from e.running()


def trust(env, *files):
    e = dict(env.daemon.env)
    e.pop("UPLINK_DEBUG", None)
    r = subprocess.run([uplink_bin(), "trust", *files], cwd=env.project, env=e, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r


def config_show(env, *args, cwd=None, check=0):
    e = dict(env.daemon.env)
    e.pop("UPLINK_DEBUG", None)
    r = subprocess.run([uplink_bin(), "config", "show", *args], cwd=cwd or env.project, env=e,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == check, (r.returncode, r.stdout, r.stderr)
    return r


INLINE = """\
# rules for the project
rules:
  - name: from-config
    hosts: ['api\\.example\\.com']
    methods: [POST]
"""


def test_config_show_merges_and_says_where(env):
    (env.tmp / ".uplink.yaml").write_text("bogus: 1\nimage: above-home\n")  # above home: not read
    (env.xdg / "uplink" / "config.yaml").write_text("idle_timeout: 2h\nttl: 9h\n")
    (env.home / ".uplink.yaml").write_text("ttl: 2h\n" + INLINE)
    (env.project / ".agent-uplink.yaml").write_text("allow_dns: true\nrules: [other.yaml]\n")
    (env.project / ".uplink.yaml").write_text("\nttl: 90m\n")
    r = config_show(env, "--json", check=5)  # a project's allow_dns waits for uplink trust
    doc = json.loads(r.stdout)
    assert doc["trust"] == [{"file": f"{env.project}/.agent-uplink.yaml", "state": "untrusted", "rules_files": [],
                             "asks": [{"at": f"{env.project}/.agent-uplink.yaml:1", "what": "allow_dns: lets the "
                                       "agent resolve names (a channel the rules cannot see)"}]}]
    assert f"uplink trust {env.project}/.agent-uplink.yaml" in r.stderr
    proj, home = str(env.project), str(env.home)
    assert doc["files"] == [f"{proj}/.uplink.yaml", f"{proj}/.agent-uplink.yaml", f"{home}/.uplink.yaml",
                            f"{env.xdg}/uplink/config.yaml"]
    v = doc["values"]
    assert v["ttl"] == {"value": "90m", "source": f"{proj}/.uplink.yaml:2"}
    assert v["allow_dns"] == {"value": True, "source": f"{proj}/.agent-uplink.yaml:1"}
    assert v["idle_timeout"] == {"value": "2h", "source": f"{env.xdg}/uplink/config.yaml:1"}
    assert v["image"] == {"value": None, "source": "default"}
    assert v["allow_exec"] == {"value": False, "source": "default"}
    assert v["notifications"] == {"value": True, "source": "default"}
    # lists add up, nearest file first
    assert v["rules"]["value"][0] == f"{proj}/other.yaml"
    assert v["rules"]["value"][1]["name"] == "from-config"
    assert v["rules"]["source"] == [f"{proj}/.agent-uplink.yaml:2", f"{home}/.uplink.yaml:4"]
    # the text form says the same
    text = config_show(env, check=5).stdout
    assert f"{proj}/.agent-uplink.yaml (untrusted) asks for:\n  {proj}/.agent-uplink.yaml:1: allow_dns" in text
    assert f"{proj}/.uplink.yaml\n" in text
    line = next(l for l in text.splitlines() if l.startswith("ttl "))
    assert "90m" in line and line.endswith(f"{proj}/.uplink.yaml:2")
    assert any(l.startswith("image ") and l.endswith("default") for l in text.splitlines())
    assert any(l.startswith("rules[1] ") and "from-config" in l for l in text.splitlines())


def test_config_show_refuses_a_broken_file(env):
    (env.project / ".uplink.yaml").write_text("ttl: 1h\nallow_dns: \"yes\"\nmount_rw_all: /x\n")
    r = config_show(env, check=1)
    p = env.project / ".uplink.yaml"
    assert f"{p}:2: 'allow_dns' expects a boolean (true/false), got 'yes'" in r.stderr
    assert f"{p}:3: unknown key 'mount_rw_all'; known keys: mode, auth_mode, " in r.stderr


def dry_run(env, *extra, check=0):
    r = env.run("claude", "--dry-run", "--show-secrets", "--image", "example/agent:1", *extra, check=check)
    return r if check else json.loads(r.stdout)["items"]


def find(items, kind, name=None):
    return next(i for i in items if i["kind"] == kind and (name is None or i["metadata"]["name"] == name))


def ttl_of(items):
    ann = find(items, "Namespace")["metadata"]["annotations"]
    t = [datetime.strptime(ann[k], "%Y-%m-%dT%H:%M:%SZ") for k in ("uplink.dev/created-at", "uplink.dev/expires-at")]
    return (t[1] - t[0]).total_seconds()


def agent_pod_spec(items):
    pod = next(i for i in items if i["kind"] == "Pod" and "agent" in i["metadata"]["name"])
    return pod["spec"]


def test_session_takes_ttl_allow_dns_and_inline_rules_from_the_file(env):
    (env.project / ".uplink.yaml").write_text("ttl: 2h\nallow_dns: true\n" + INLINE)
    trust(env)  # allow_dns from a project's file
    items = dry_run(env)
    assert ttl_of(items) == 2 * 3600
    assert "dnsPolicy" not in agent_pod_spec(items)
    secret = find(items, "Secret", "rules-json")
    rules = json.loads(base64.b64decode(secret["data"]["rules.json"]))["rules"]
    mine = [r for r in rules if r["name"] == "from-config"]
    assert mine and mine[0]["layer"] == "user" and mine[0]["hosts"] == ["api\\.example\\.com"]
    assert mine[0]["source"] == f"{env.project}/.uplink.yaml:5"
    # without the file: the defaults
    (env.project / ".uplink.yaml").unlink()
    items = dry_run(env)
    assert ttl_of(items) == 24 * 3600
    assert agent_pod_spec(items).get("dnsPolicy")
    rules = json.loads(base64.b64decode(find(items, "Secret", "rules-json")["data"]["rules.json"]))["rules"]
    assert not [r for r in rules if r["name"] == "from-config"]


def test_a_flag_beats_the_file(env):
    (env.home / ".uplink.yaml").write_text("ttl: 2h\n")
    (env.project / ".uplink.yaml").write_text("ttl: 5h\n")
    assert ttl_of(dry_run(env)) == 5 * 3600          # the nearest file wins
    assert ttl_of(dry_run(env, "--ttl", "3h")) == 3 * 3600  # the flag beats both


def test_a_broken_file_refuses_the_run_with_file_and_line(env):
    (env.home / ".uplink.yaml").write_text("ttl: 2h\n\nallow_dsn: true\n")
    r = dry_run(env, check=1)
    assert f"{env.home}/.uplink.yaml:3: unknown key 'allow_dsn'; known keys: " in r.stderr
    (env.home / ".uplink.yaml").write_text("rules:\n  - name: bad\n    hosts: []\n")
    r = dry_run(env, check=1)
    assert f"{env.home}/.uplink.yaml:3:12: rule 'bad': " in r.stderr
    assert env.docker_calls_list() == []


def test_list_keys_add_to_the_flags_and_paths_are_the_files(env):
    (env.home / "shared").mkdir()
    (env.project / "ro.txt").write_text("x")
    (env.home / ".uplink.yaml").write_text("mount_ro: [proj/ro.txt]\nssh_cidr: 10.0.0.0/8\n")
    (env.project / ".uplink.yaml").write_text("add_dir:\n  - ~/shared\nmitm_debug: true\n")
    trust(env)
    r = config_show(env, "--json")
    v = json.loads(r.stdout)["values"]
    assert v["add_dir"] == {"value": [f"{env.home}/shared"], "source": [f"{env.project}/.uplink.yaml:2"]}
    assert v["mount_ro"]["value"] == [f"{env.project}/ro.txt"]
    assert v["mitm_debug"] == {"value": True, "source": f"{env.project}/.uplink.yaml:3"}
    items = dry_run(env, "--ssh-cidr", "192.168.1.1")
    egress = find(items, "NetworkPolicy", "agent-egress")["spec"]["egress"]
    cidrs = [t["ipBlock"]["cidr"] for e in egress for t in e.get("to", []) if "ipBlock" in t]
    assert cidrs == ["192.168.1.1/32", "10.0.0.0/8"]  # the flag's first, then the file's
    mounts = {m["mountPath"]: m for m in agent_pod_spec(items)["containers"][0]["volumeMounts"]}
    assert f"{env.home}/shared" in mounts and not mounts[f"{env.home}/shared"].get("readOnly")
    assert mounts[f"{env.project}/ro.txt"]["readOnly"] is True
    mitm = next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == "mitm")
    assert "termlog_verbosity=debug" in mitm["spec"]["containers"][0]["args"]


def test_a_bad_value_from_a_file_is_named_by_its_line(env):
    (env.project / ".uplink.yaml").write_text("ttl: 2h\nagent_runtime_class: Not_A_Name\n")
    trust(env)
    r = dry_run(env, check=1)
    assert f"{env.project}/.uplink.yaml:2: agent_runtime_class: 'Not_A_Name' is not a valid RuntimeClass name" \
        in r.stderr
    (env.project / ".uplink.yaml").write_text("mode: vertex\n")
    r = dry_run(env, check=1)
    assert f"{env.project}/.uplink.yaml:1: mode: agent claude has no mode 'vertex'" in r.stderr
    # the same value from a flag is named by the flag
    (env.project / ".uplink.yaml").unlink()
    r = dry_run(env, "--agent-runtime-class", "Not_A_Name", check=1)
    assert "--agent-runtime-class: 'Not_A_Name' is not a valid RuntimeClass name" in r.stderr


def test_a_projects_file_cannot_allow_exec_even_trusted(env):
    (env.project / "x.yaml").write_text("rules:\n  - name: x\n    hosts: ['a\\.test']\n    inject:\n"
                                        "      headers: {X-A: '{{exec:echo hi}}'}\n")
    (env.project / ".uplink.yaml").write_text("allow_exec: true\nrules: [x.yaml]\nmount_ro: [x.yaml]\n")
    p = env.project / ".uplink.yaml"
    # untrusted: refused, naming what it asks for (allow_exec is never a project's to ask)
    r = dry_run(env, check=5)
    assert f"{p}:3: mount_ro: mounts a host path into the agent" in r.stderr
    assert f"{env.project}/x.yaml:2: runs 'echo hi' on this machine" in r.stderr
    assert "allow_exec:" not in r.stderr
    # trusted: still no allow_exec from it, and the rule's command is refused, not run
    trust(env)
    r = dry_run(env, check=1)
    assert (f"{p}:1: allow_exec is not taken from a project's config file, trusted or not (a repository could run "
            "commands on this machine with it); pass --allow-exec") in r.stderr
    assert "uses an {{exec:...}} placeholder, and commands from rules run only when you allow them" in r.stderr
    # the same in the user's own files is theirs to say
    (env.xdg / "uplink" / "config.yaml").write_text("allow_exec: true\n")
    p.write_text("rules: [x.yaml]\n")
    trust(env)
    r = env.run("claude", "--dry-run", "--image", "example/agent:1", "--rules", str(env.project / "x.yaml"),
                env={"PATH": "/usr/bin:/bin"}, check=0)
    assert "allow_exec is not taken" not in r.stderr
