#!/usr/bin/python3
"""Adds up the results of every test run under a results folder and prints the one
closing line CI reads: `N passed, N failed[, N skipped]`.

Sources: cmocka and pytest JUnit XML files (one <testcase> per test), meson's
testlog.json (a unit executable that crashed before writing its XML counts as one
failure), and *.status files written by .ci/run (exit codes of fuzz runs and builds)."""

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(root):
    passed = failed = skipped = 0
    failures = []
    root = Path(root)
    xml_groups = set()
    for xml in sorted(root.rglob("*.xml")):
        try:
            tree = ET.parse(xml)
        except ET.ParseError as e:
            failed += 1
            failures.append(f"{xml}: unreadable results ({e})")
            continue
        for suite in tree.iter("testsuite"):
            xml_groups.add((xml.parent.name, suite.get("name", "")))
        for case in tree.iter("testcase"):
            name = f"{xml.parent.name}: {case.get('classname', '')}::{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failures.append(name)
            elif case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
    for log in sorted(root.rglob("testlog.json")):
        for line in log.read_text().splitlines():
            t = json.loads(line)
            if t["result"] not in ("OK", "SKIP", "EXPECTEDFAIL"):
                written = (root / log.parent.name / f"{t['name']}.xml")
                # cmocka wrote its cases (and their failures) unless the binary died early.
                if not written.exists() or written.stat().st_size == 0:
                    failed += 1
                    failures.append(f"{log.parent.name}: {t['name']} ({t['result']}, no results written)")
    for status in sorted(root.rglob("*.status")):
        ok = status.read_text().strip() == "0"
        passed += ok
        failed += not ok
        if not ok:
            failures.append(f"{status.parent.name}: {status.stem} failed (see its log)")
    for f in failures:
        print(f"FAILED {f}")
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
