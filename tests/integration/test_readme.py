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
