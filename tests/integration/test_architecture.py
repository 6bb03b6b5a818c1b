"""The module boundaries docs/architecture.md describes, checked on the sources.

- No RPC file (daemon/rpc*.c) includes session-private.h: the RPC layer sees a session
  only through session.h.
- Nothing under agents/ includes a daemon/ header: the daemon includes agents, never the
  reverse.
- The `/* file.c` index of session.h and session-private.h is right: every prototype sits
  under the comment naming the file that defines it.
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DAEMON = ROOT / "daemon"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# A comment that opens with the file it indexes: /* session-limits.c: ... */
SECTION = re.compile(r"^/\*\s*([a-z0-9-]+\.c)\b")
# A prototype at the start of a line: `type name(` ending in `;` (possibly lines later).
PROTO = re.compile(r"^(?!typedef|struct \w+ \{|#|\s|/\*|\*)[^;{}()]*?\b(\w+)\(")


def includes(path):
    return INCLUDE.findall(path.read_text())


def test_no_rpc_file_includes_session_private():
    offenders = [
        p.name
        for p in sorted(DAEMON.glob("rpc*.c"))
        if "session-private.h" in includes(p)
    ]
    assert offenders == [], (
        f"{offenders} include session-private.h; give session.h the accessor they need"
    )


def test_agents_include_no_daemon_header():
    daemon_headers = {p.name for p in DAEMON.glob("*.h")}
    offenders = []
    for p in sorted((ROOT / "agents").rglob("*.[ch]")):
        for inc in includes(p):
            if inc.startswith("daemon/") or inc in daemon_headers:
                offenders.append(f"{p.relative_to(ROOT)}: {inc}")
    assert offenders == [], f"agents/ must not include daemon headers: {offenders}"


def defines(source, name):
    """Whether `source` defines function `name` (not only declares or calls it)."""
    return re.search(rf"^[^\s#/*][^;{{}}]*\b{name}\([^;]*?\)\s*\n\{{", source, re.M | re.S)


def index_errors(header):
    errors, section = [], None
    lines = header.read_text().splitlines()
    for no, line in enumerate(lines, 1):
        m = SECTION.match(line)
        if m:
            section = m.group(1)
            continue
        m = PROTO.match(line)
        if not m or "=" in line.split("(")[0]:
            continue
        name = m.group(1)
        if section is None:
            errors.append(f"{header.name}:{no}: {name}() is under no /* file.c index")
            continue
        source = (DAEMON / section).read_text() if (DAEMON / section).exists() else ""
        if not defines(source, name):
            errors.append(f"{header.name}:{no}: {name}() is not defined in {section}")
    return errors


def test_session_headers_index_is_right():
    errors = []
    for h in ("session.h", "session-private.h"):
        errors += index_errors(DAEMON / h)
    assert errors == [], "\n".join(errors)
