"""uplink completion bash|zsh|fish: the scripts really complete (bash driven through
COMP_WORDS and its completion function, fish through `complete -C`, zsh's function with
compadd captured), session ids come from a running uplinkd against fakekube, nothing hangs
without one, and every command and option of the table is in each script."""

import os
import re
import shutil
import socket
import subprocess
import threading

import pytest

from uplinktest import run_detached, uplink_bin

NO_DAEMON = {"UPLINK_SOCKET": "/nonexistent/uplinkd.sock"}


def script(shell):
    r = subprocess.run([uplink_bin(), "completion", shell], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def bash_complete(words, env_extra=None, tmp=None, prog="uplink"):
    """What bash offers for `words` (the last is the word under the cursor)."""
    s = tmp / "uplink.bash"
    s.write_text(script("bash"))
    drive = (f"source {s}\n"
             'COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()\n'
             "_uplink\n"
             "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    e = {**os.environ, "PATH": f"{os.path.dirname(uplink_bin())}:{os.environ['PATH']}", **(env_extra or {})}
    r = subprocess.run(["bash", "-c", drive, "bash", prog, *words], capture_output=True, text=True,
                       env=e, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return [l for l in r.stdout.splitlines() if l]


def test_bash_completes_commands_and_flags(tmp_path):
    assert set(bash_complete(["ru"], NO_DAEMON, tmp_path)) == {"run", "rules"}
    assert bash_complete(["atta"], NO_DAEMON, tmp_path) == ["attach"]
    assert bash_complete(["run", "--no-"], NO_DAEMON, tmp_path) == ["--no-default-rules", "--no-git-identity"]
    assert bash_complete(["rules", ""], NO_DAEMON, tmp_path) == ["check", "lint", "render", "suggest"]
    assert bash_complete(["rules", "check", "--r"], NO_DAEMON, tmp_path) == ["--rules"]
    assert bash_complete(["run", "-o", ""], NO_DAEMON, tmp_path) == ["json", "yaml"]
    assert bash_complete(["run", ""], NO_DAEMON, tmp_path) == ["claude", "codex", "gemini", "opencode"]
    assert bash_complete(["completion", ""], NO_DAEMON, tmp_path) == ["bash", "zsh", "fish"]
    # an option's value is not taken for a positional: after --ttl 2h, the agent comes next
    assert bash_complete(["run", "--ttl", "2h", "cl"], NO_DAEMON, tmp_path) == ["claude"]
    # the agent's own arguments are its business
    assert bash_complete(["run", "claude", "--", "--no"], NO_DAEMON, tmp_path) == []
    (tmp_path / "rules-a.yaml").write_text("")
    assert bash_complete(["run", "--rules", str(tmp_path / "rules-")], NO_DAEMON, tmp_path) == \
        [str(tmp_path / "rules-a.yaml")]


def test_bash_runs_the_uplink_that_is_typed(tmp_path):
    """`~/bin/uplink attach <TAB>` asks that uplink (the tilde as the shell would expand it)."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "uplink").symlink_to(uplink_bin())
    e = {**NO_DAEMON, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    assert bash_complete(["run", ""], e, tmp_path, prog="~/bin/uplink") == ["claude", "codex", "gemini", "opencode"]


def test_bash_registers_the_function(tmp_path):
    s = tmp_path / "uplink.bash"
    s.write_text(script("bash"))
    r = subprocess.run(["bash", "-c", f"source {s}; complete -p uplink"], capture_output=True, text=True)
    assert r.stdout.strip() == "complete -F _uplink uplink", r


def test_bash_completes_session_ids_from_the_daemon(env, tmp_path):  # noqa: F811
    ids = sorted(run_detached(env)[0] for _ in range(2))
    e = {"UPLINK_SOCKET": str(env.daemon.socket)}
    for cmd in ("attach", "stop", "logs", "extend", "rules suggest"):
        assert sorted(bash_complete([*cmd.split(), ""], e, tmp_path)) == ids, cmd
    assert bash_complete(["attach", ids[0][:5]], e, tmp_path) == [ids[0]] or ids[0][:5] == ids[1][:5]
    # SESSION... repeats for stop; extend's second argument is a duration
    assert sorted(bash_complete(["stop", ids[0], ""], e, tmp_path)) == ids
    assert bash_complete(["extend", ids[0], ""], e, tmp_path) == []


def test_session_words_without_a_daemon_are_empty():
    r = subprocess.run([uplink_bin(), "completion", "--words", "sessions"], capture_output=True, text=True,
                       env={**os.environ, **NO_DAEMON}, timeout=30)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_session_words_from_a_stuck_daemon_are_bounded(tmp_path):
    """A socket that accepts and never answers (uplinkd stuck, or starting): the words come
    back empty after UP_COMPLETION_TIMEOUT_MS instead of hanging the shell."""
    path = tmp_path / "stuck.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)
    held = []
    t = threading.Thread(target=lambda: held.append(srv.accept()), daemon=True)
    t.start()
    try:
        r = subprocess.run([uplink_bin(), "completion", "--words", "sessions"], capture_output=True,
                           text=True, env={**os.environ, "UPLINK_SOCKET": str(path)}, timeout=60)
        assert (r.returncode, r.stdout) == (0, "")
    finally:
        for conn, _ in held:
            conn.close()
        srv.close()


def test_bash_completes_kube_contexts(tmp_path):
    if not shutil.which("kubectl"):
        pytest.skip("kubectl is not installed")
    kc = tmp_path / "kubeconfig"
    kc.write_text("apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncurrent-context: dev\n"
                  "contexts:\n- name: dev\n  context: {cluster: a, user: b}\n"
                  "- name: prod\n  context: {cluster: a, user: b}\n")
    e = {**NO_DAEMON, "KUBECONFIG": str(kc)}
    assert bash_complete(["run", "--kube-context", ""], e, tmp_path) == ["dev", "prod"]
    assert bash_complete(["doctor", "--deploy-context", "p"], e, tmp_path) == ["prod"]
    # --kubeconfig given on the line is the one read
    e2 = {**NO_DAEMON, "KUBECONFIG": "/nonexistent"}
    assert bash_complete(["run", "--kubeconfig", str(kc), "--kube-context", "d"], e2, tmp_path) == ["dev"]


def test_zsh_script_parses_and_completes(tmp_path):
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed (.ci/run installs it)")
    s = tmp_path / "_uplink"
    s.write_text(script("zsh"))
    r = subprocess.run(["zsh", "-n", str(s)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # compadd (filtering by PREFIX, -a naming arrays) and compdef stand-ins, outside of zle
    drive = ("compadd() {\n"
             "  local -a out; local arr=0 words_only=0 a\n"
             "  for a; do\n"
             "    if ((!words_only)) && [[ $a == -a ]]; then arr=1\n"
             "    elif ((!words_only)) && [[ $a == -- ]]; then words_only=1\n"
             "    elif ((arr)); then out+=(${(P)a})\n"
             "    else out+=($a); fi\n"
             "  done\n"
             "  print -rl -- ${(M)out:#${PREFIX}*}\n"
             "}\n"
             "compdef() { :; }\n"
             f"source {s}\n"
             "words=(uplink \"$@\"); CURRENT=$#words; PREFIX=$words[-1]\n"
             "_uplink\n")
    out = subprocess.run(["zsh", "-f", "-c", drive, "zsh", "run", "--no-"], capture_output=True, text=True,
                         env={**os.environ, **NO_DAEMON})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["--no-default-rules", "--no-git-identity"], out.stderr
    out = subprocess.run(["zsh", "-f", "-c", drive, "zsh", "run", "-o", ""], capture_output=True, text=True)
    assert out.stdout.split() == ["json", "yaml"], out.stderr


def test_fish_script_parses_and_completes(tmp_path):
    if not shutil.which("fish"):
        pytest.skip("fish is not installed (.ci/run installs it)")
    s = tmp_path / "uplink.fish"
    s.write_text(script("fish"))
    r = subprocess.run(["fish", "--no-execute", str(s)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    def fish(line):
        out = subprocess.run(["fish", "--no-config", "-c", f"source {s}; complete -C '{line}'"],
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, **NO_DAEMON, "HOME": str(tmp_path)})
        assert out.returncode == 0, out.stderr
        return [l.split("\t")[0] for l in out.stdout.splitlines()]
    assert {"run", "rules"} <= set(fish("uplink ru"))
    assert fish("uplink run --no-") == ["--no-default-rules", "--no-git-identity"]
    assert fish("uplink rules ") == ["check", "lint", "render", "suggest"]
    assert fish("uplink run -o ") == ["json", "yaml"]


def help_options(*cmd):
    """The options `uplink CMD --help` shows, read independently of the client's own parser."""
    r = subprocess.run([uplink_bin(), *cmd, "--help"], capture_output=True, text=True)
    body = r.stdout.split("\n", 1)[0].split(" ".join(cmd), 1)[1] + "\n" + r.stdout.split("\n\n", 2)[-1]
    return set(re.findall(r"(?:^|(?<=[\s\[|,(]))(--?[A-Za-z][A-Za-z0-9-]*)", body))


def table_commands():
    top = subprocess.run([uplink_bin(), "--help"], capture_output=True, text=True).stdout
    block = top.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [re.split(r"\s{2,}", line.strip())[0] for line in block.splitlines() if line.strip()]


def test_every_command_and_option_is_in_each_script():
    """The scripts are printed from the table; this says so for every entry, so neither a new
    command nor a new option can be left out of completion."""
    cmds = table_commands()
    assert "completion" in cmds and "run" in cmds
    bash = script("bash")
    specs = dict(re.findall(r"\t'([a-z ]+)'\)\n\t\t_u_opts='([^']*)'", bash))
    for shell in ("zsh", "fish"):
        text = script(shell)
        for cmd in cmds:
            for word in cmd.split():
                assert re.search(rf"\b{word}\b", text), (shell, cmd)
    for cmd in cmds:
        opts = help_options(*cmd.split())
        assert cmd in specs, f"no completion entry for '{cmd}'"
        missing = opts - set(specs[cmd].split())
        assert not missing, f"uplink {cmd}: options not completed: {missing}"
        zsh, fish = script("zsh"), script("fish")
        for o in opts:
            assert o in zsh, ("zsh", cmd, o)
            flag = f"-l {o[2:]}" if o.startswith("--") else f"-s {o[1:]}"
            assert flag in fish, ("fish", cmd, o)


def test_agents_are_those_the_daemon_knows(env):  # noqa: F811
    """The agent names are compiled into the client: they must be uplinkd's."""
    r = env.run("nope-agent", "--dry-run", "--image", "example/agent:1", check=None)
    known = re.search(r"known: (.*)", r.stderr)
    assert known, r.stderr
    names = re.findall(r"(?:^|; )([a-z0-9-]+) \(modes", known.group(1))
    words = subprocess.run([uplink_bin(), "completion", "--words", "agents"], capture_output=True,
                           text=True).stdout.split()
    assert words == names


def test_usage_errors():
    for args, msg in ((["completion"], "give one shell"), (["completion", "tcsh"], "unknown shell 'tcsh'"),
                      (["completion", "--words", "pods"], "--words takes sessions or agents")):
        r = subprocess.run([uplink_bin(), *args], capture_output=True, text=True)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
