"""The repository explains itself: no tracked file sends its reader to a document a clone
does not have. Comments used to cite a design file and numbered sections of a behaviour
reference that lived beside the project; what they stood for is now said where it is
needed, or in docs/architecture.md. This test fails, naming FILE:LINE, when such a
citation comes back.
"""

import re
import shutil
import subprocess

import pytest

from uplinktest import ROOT

# Spelled so that this file does not match itself.
SECTION = "\u00a7"
CITATION = re.compile("|".join([
    re.escape("DES" + "IGN.md"),
    re.escape("reference " + SECTION),
    re.escape(SECTION) + r"\s?[0-9]",
]))


def tracked_files():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    top = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True)
    if top.returncode != 0 or top.stdout.strip() != str(ROOT):
        pytest.skip(f"{ROOT} is not a git checkout")
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                       check=True)
    return [name for name in r.stdout.decode().split("\0") if name]


def text_lines(path):
    """The lines of a text file; None for a binary one (a NUL, or not UTF-8)."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def test_no_tracked_file_cites_documents_outside_the_repository():
    names = tracked_files()
    assert "README.md" in names, "git ls-files does not list README.md"
    found = []
    for name in names:
        path = ROOT / name
        if path.is_symlink() or not path.is_file():
            continue
        for no, line in enumerate(text_lines(path) or [], 1):
            m = CITATION.search(line)
            if m:
                found.append(f"{name}:{no}: {m.group(0)!r} in {line.strip()[:120]!r}")
    assert found == [], (
        "these lines cite a document outside the repository; say the fact itself, or point "
        "to a section of docs/architecture.md that says it:\n" + "\n".join(found))
