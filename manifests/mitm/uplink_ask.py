"""uplink filter addon: ask mode (held requests and the user's decisions on them).

A request no rule allows, and that is not refused by design, is held (its flow
intercepted on the mitm's loop, nothing sent upstream) for at most ``ask_timeout``
seconds while uplinkd asks the user. uplinkd reads what waits and decides through the
control listener (``uplink_control``, whose ``register`` this module needs only):

    GET  /v1/held?wait=S&after=SEQ   long poll; {"seq", "held": [...]} (no header, no body)
    POST /v1/held/<id>               {"decision": "once"|"session"|"deny", "rule": {...}}

Identical waiting requests (method, scheme, host, port, path) share one entry. A
"session" decision adds its rule to this session's own layer (kept here until the
daemon's next rules push carries it too) and releases every waiting request it allows.
Loaded by filter.py (see README.md); ``rules`` is set to uplink_rules before it runs.
"""

from __future__ import annotations

import asyncio
import time

DEFAULT_TIMEOUT_S = 60
TIMEOUT_MAX_S = 600
HELD_MAX = 64               # distinct held requests at once; over it: denied as without ask
HELD_FLOWS_MAX = 256        # flows sharing one held entry; over it: denied
WAIT_MAX_S = 50             # a long poll's longest wait (under the listener's idle timeout)
SESSION_RULES_MAX = 256     # rules a session's approvals may add
FIELD_MAX = 2048            # the longest path or host listed (longer ones are cut)
_SESSION_RULE_KEYS = {"name", "hosts", "methods", "paths"}
DECISIONS = ("once", "session", "deny")


class Held:
    """One waiting request and the flows (identical requests) sharing it."""
    __slots__ = ("id", "key", "method", "scheme", "host", "port", "path", "query_present",
                 "since", "expires", "flows", "timer")

    def listing(self):
        return {"id": self.id, "method": self.method, "scheme": self.scheme,
                "host": self.host, "port": self.port, "path": self.path[:FIELD_MAX],
                "query_present": self.query_present, "since": round(self.since, 3),
                "expires": round(self.expires, 3), "count": len(self.flows)}


class Asker:
    """The held requests of one session, with three functions of the filter's:
    ``release(flow, decision)`` lets the flow go on (decision "once"/"session") or answers
    it with the 403 (decision "deny"/"timeout"), before it is resumed here;
    ``allows(held)`` says whether the rules now allow a held request; and
    ``parse_rule(index, raw)`` makes a Rule (raising ValueError when it is not one)."""

    def __init__(self, release, allows, parse_rule):
        self.release, self.allows, self.parse_rule = release, allows, parse_rule
        self.enabled = False
        self.timeout_s = DEFAULT_TIMEOUT_S
        self.held = {}          # id -> Held
        self.by_key = {}        # key -> Held
        self.next_id = 1
        self.seq = 0            # bumped on every change of what is held
        self._changed = None    # asyncio.Event set (and replaced) on a change
        self.session_raw = []   # the rules the user allowed for this session (JSON objects)
        self.session_version = 0

    def register(self, control):
        control.register("GET", "/v1/held", self._get_held)
        control.register("POST", "/v1/held/", self._post_held)

    # -- holding

    def hold(self, flow, method, host, path):
        """Holds the flow (True) or says it cannot (False: ask mode off, or too many)."""
        if not self.enabled:
            return False
        req = flow.request
        key = (method, req.scheme, host, req.port, path)
        entry = self.by_key.get(key)
        if entry is not None:
            if len(entry.flows) >= HELD_FLOWS_MAX:
                return False
            entry.flows.append(flow)
        else:
            if len(self.held) >= HELD_MAX:
                return False
            entry = self._new_entry(key, flow)
        flow.intercept()
        self._bump()
        return True

    def _new_entry(self, key, flow):
        entry = Held()
        entry.id, self.next_id = str(self.next_id), self.next_id + 1
        entry.key = key
        entry.method, entry.scheme, entry.host, entry.port, path = key
        entry.path, _, query = path.partition("?")
        entry.query_present = bool(query) or "?" in path
        entry.since = time.time()
        entry.expires = entry.since + self.timeout_s
        entry.flows = [flow]
        loop = asyncio.get_running_loop()
        entry.timer = loop.call_later(self.timeout_s, self._expire, entry.id)
        self.held[entry.id] = entry
        self.by_key[key] = entry
        return entry

    def _bump(self):
        self.seq += 1
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _finish(self, entry, decision):
        del self.held[entry.id]
        del self.by_key[entry.key]
        entry.timer.cancel()
        for flow in entry.flows:
            try:
                self.release(flow, decision)
            finally:
                flow.resume()
        self._bump()

    def _expire(self, held_id):
        entry = self.held.get(held_id)
        if entry is not None:
            self._finish(entry, "timeout")

    def drop_client(self, client_id):
        """A client went away: its held flows end, refused (nothing goes upstream), and an
        entry with none left is withdrawn."""
        for entry in list(self.held.values()):
            gone = [f for f in entry.flows if f.client_conn.id == client_id]
            entry.flows = [f for f in entry.flows if f.client_conn.id != client_id]
            for flow in gone:
                try:
                    self.release(flow, "gone")
                finally:
                    flow.resume()
            if not entry.flows:
                del self.held[entry.id]
                del self.by_key[entry.key]
                entry.timer.cancel()
                self._bump()

    # -- the session's own rules

    def session_rules(self, offset):
        """This session's approved rules as Rule objects numbered from ``offset``."""
        return [self.parse_rule(offset + i, raw) for i, raw in enumerate(self.session_raw)]

    def _add_session_rule(self, raw):
        """Checks a rule the daemon sends with a "session" decision: hosts, methods and
        paths only (never credentials, never a relay); returns an error or None."""
        if not isinstance(raw, dict) or not raw.get("hosts"):
            return "'rule' must be an object with 'hosts'"
        unknown = sorted(set(raw) - _SESSION_RULE_KEYS)
        if unknown:
            return f"a session rule may set only name, hosts, methods and paths, not '{unknown[0]}'"
        if len(self.session_raw) >= SESSION_RULES_MAX:
            return f"this session already has {SESSION_RULES_MAX} approved rules"
        rule = dict(raw, layer="session")
        rule.setdefault("name", "approved")
        try:
            self.parse_rule(0, rule)
        except ValueError as e:
            return str(e)
        self.session_raw.append(rule)
        self.session_version += 1
        return None

    # -- the control endpoints

    async def _get_held(self, request):
        q = request.query or {}
        try:
            wait = min(max(float(q.get("wait", 0)), 0.0), WAIT_MAX_S)
            after = int(q.get("after", -1))
        except (TypeError, ValueError):
            return 400, {"error": "wait and after must be numbers"}
        if wait > 0 and self.seq <= after:
            if self._changed is None:
                self._changed = asyncio.Event()
            try:
                await asyncio.wait_for(self._changed.wait(), wait)
            except asyncio.TimeoutError:
                pass
        return 200, {"seq": self.seq, "enabled": self.enabled,
                     "held": [e.listing() for e in self.held.values()]}

    async def _post_held(self, request):
        held_id = request.path.rsplit("/", 1)[-1]
        body = request.json if isinstance(request.json, dict) else {}
        decision = body.get("decision")
        if decision not in DECISIONS:
            return 400, {"error": "decision must be once, session or deny"}
        entry = self.held.get(held_id)
        if entry is None:
            return 404, {"error": f"no held request {held_id} (answered or timed out)"}
        if decision != "session":
            self._finish(entry, decision)
            return 200, {"released": 1 if decision == "once" else 0}
        err = self._add_session_rule(body.get("rule"))
        if err:
            return 400, {"error": f"rule: {err}"}
        released = 0
        for other in list(self.held.values()):
            if self.allows(other):
                released += len(other.flows)
                self._finish(other, "session")
        if held_id in self.held:  # the rule does not cover the request it was made for
            return 200, {"released": released, "warning": "the rule does not allow this request"}
        return 200, {"released": released}
