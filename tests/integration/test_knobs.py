"""README.md's environment table ("Files and environment") lists exactly the daemon's
knobs, as `uplinkd --help-env` prints its table (daemon/knobs.h): the user-facing ones in
plain rows, the tests-only ones in rows that say "test knob". The standard variables (HOME,
XDG_*, ...) need no row. Adding a knob to daemon/knobs.h without a README row, or the other
way round, fails here.
"""

import re
import subprocess

from uplinktest import ROOT, uplinkd_bin

# Read by the client only (client/), so not in the daemon's table.
CLIENT_ONLY = {"UPLINK_KUBECTL"}


def knob_table():
    r = subprocess.run([uplinkd_bin(), "--help-env"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert rows and all(len(row) == 5 for row in rows), r.stdout
    return {name: kind for name, kind, _type, _default, _meaning in rows}


def readme_env_rows():
    text = (ROOT / "README.md").read_text()
    section = text.split("### Files and environment\n", 1)[1]
    table = section.split("| variable | what it does |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines():
        first, what = line.split(" | ", 1)
        for name in re.findall(r"`([A-Z][A-Z0-9_]*)(?:=[^`]*)?`", first):
            rows[name] = "test" if "test knob" in what else "user"
    return rows


def test_help_env_prints_each_knob_once_with_a_kind():
    r = subprocess.run([uplinkd_bin(), "--help-env"], capture_output=True, text=True)
    names = [line.split("\t")[0] for line in r.stdout.splitlines()]
    assert len(names) == len(set(names)), names
    assert set(knob_table().values()) <= {"user", "test", "system"}


def test_readme_environment_table_lists_exactly_the_daemons_knobs():
    knobs = knob_table()
    readme = readme_env_rows()
    want = {n: k for n, k in knobs.items() if k != "system"}
    got = {n: k for n, k in readme.items() if n not in CLIENT_ONLY}
    assert got == want, {
        "in the table, not in the README": sorted(set(want) - set(got)),
        "in the README, not in the table": sorted(set(got) - set(want)),
        "test knob or not, told otherwise": sorted(n for n in set(got) & set(want)
                                                   if got[n] != want[n]),
    }
