"""README.md's command reference is the client's own help, so it cannot drift:
this test fails when they differ. To refresh it after changing a command's help:

    UPLINK_README_UPDATE=1 /usr/bin/python3 -m pytest tests/integration/test_readme.py
"""

import os
import re
import subprocess

from uplinktest import ROOT, uplink_bin

BEGIN = "<!-- commands:begin (generated from uplink --help by tests/integration/test_readme.py) -->"
END = "<!-- commands:end -->"


def help_text(*args):
    r = subprocess.run([uplink_bin(), *args, "--help"], capture_output=True, text=True)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout.rstrip("\n")


def commands():
    top = help_text()
    block = top.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [re.split(r"\s{2,}", line.strip())[0] for line in block.splitlines() if line.strip()]


def generated():
    parts = ["```text", help_text(), "```"]
    for cmd in commands():
        parts += ["", f"#### `uplink {cmd}`", "", "```text", help_text(*cmd.split()), "```"]
    return "\n".join([BEGIN, *parts, END])


def test_readme_documents_every_command_as_its_help_says():
    path = ROOT / "README.md"
    text = path.read_text()
    want = generated()
    if os.environ.get("UPLINK_README_UPDATE") == "1":
        start, end = text.index(BEGIN), text.index(END) + len(END)
        path.write_text(text[:start] + want + text[end:])
        text = path.read_text()
    assert BEGIN in text and END in text, "README.md lacks the generated command reference"
    current = text[text.index(BEGIN):text.index(END) + len(END)]
    assert current == want, ("README.md's command reference differs from `uplink --help`; "
                             "refresh it with UPLINK_README_UPDATE=1 (see this file)")
    for cmd in commands():
        assert f"#### `uplink {cmd}`" in text


# A row of common/session-options.h: XX("flag", short, key, TYPE, WHERE, ... trust)
OPTION_ROW = re.compile(r'^\s*XX\("[^"]*", (?:0|\'.\'), (\w+), (\w+), (\w+),(.*?)\)(?: \\)?$',
                        re.M | re.S)


def option_rows():
    text = (ROOT / "common" / "session-options.h").read_text()
    table = text.split("#define UP_SESSION_OPTIONS(XX)", 1)[1].split("/* clang-format on */")[0]
    rows = []
    for chunk in re.split(r"\n(?=\s*XX\()", table):
        m = OPTION_ROW.match(chunk.strip("\n"))
        if m:
            key, kind, where, rest = m.groups()
            widens = not re.search(r",\s*NULL\)?\s*\\?\s*$", rest.rstrip(") \\\n"))
            rows.append((key, kind, where, widens))
    return rows


def test_help_names_every_config_key_of_the_options_table():
    """`uplink config show` and `uplink trust` list the config keys in their help by hand:
    a row added to common/session-options.h must be named there too."""
    rows = option_rows()
    assert len(rows) > 30, "cannot read the rows of common/session-options.h"
    keys = [r for r in rows if r[0] != "_" and r[2] in ("CONFIG", "FLAG_CONFIG",
                                                        "PARAM_CONFIG", "ALL")]
    shown, trust = help_text("config", "show"), help_text("trust")
    missing = [k for k, *_ in keys if not re.search(rf"\b{k}\b", shown)]
    assert missing == [], f"uplink config show --help does not name the keys {missing}"
    widening = [k for k, _, _, widens in keys if widens]
    assert "mitm_insecure" in widening and "mode" not in widening
    missing = [k for k in widening if not re.search(rf"\b{k}\b", trust)]
    assert missing == [], f"uplink trust --help does not name the keys {missing} that need trust"
