"""Desktop notifications against a real private dbus-daemon and python3-dbusmock's
notification_daemon template (its call log is the capture), and the watchdog with a
blocked loop. uplinkd runs with UPLINK_DEBUG_RPC=1, whose debug.notify sends each
kind of notification the way the sessions do."""

import json
import os

import pytest

from uplinktest import MOCK, NAME, PATH, Daemon, RpcError, wait_for

dbus = pytest.importorskip("dbus")

def start_daemon(tmp, env=None, notify=False, drop=()):
    e = {"UPLINK_DEBUG_RPC": "1", "KUBECONFIG": "/nonexistent/kubeconfig"}
    e.update(env or {})
    d = Daemon(tmp, env=e, notify=notify)
    for name in drop:
        d.env.pop(name, None)
    return d.start()


def stop_daemon(d):
    rc = d.stop()
    d.close()
    assert rc == 0, f"uplinkd exited {rc}; its log:\n{d.logs()}"
    assert "left open" not in d.logs()


@pytest.fixture
def served(tmpdir_short, bus):
    bus.start_server()
    d = start_daemon(tmpdir_short, bus.env())
    yield d, bus
    stop_daemon(d)


def notify(d, **params):
    with d.rpc() as c:
        return c.call("debug.notify", params)


BARRIER = "uplinktest barrier"


def barrier(d, bus):
    """Every Notify uplinkd sent before this call is in the mock's log once it returns: the
    daemon sends them in order on its one bus connection, and the marker's Notify comes last.
    Returns the calls before the marker (the marker is cleared with them)."""
    notify(d, kind="credential", id="999999999999", reason=BARRIER)
    wait_for(lambda: any(BARRIER in c["body"] for c in bus.notify_calls()), what="the marker's Notify")
    calls = bus.notify_calls()
    bus.clear()
    at = next(i for i, c in enumerate(calls) if BARRIER in c["body"])
    assert at == len(calls) - 1, calls
    return calls[:at]


def one_notify(d, bus):
    calls = barrier(d, bus)
    assert len(calls) == 1, calls
    return calls[0]


def test_exited_sends_exactly_one_notify(served):
    d, bus = served
    res = notify(d, kind="exited", id="aaaaaaaaaaaa", agent="claude", cwd="/home/u/proj",
                 exit_code=3, duration=3725, denied=2)
    assert res["backend"] == "dbus"
    n = one_notify(d, bus)
    assert n["app"] == "uplink"
    assert n["summary"] == "claude finished"
    assert n["body"] == ("Session aaaaaaaaaaaa in /home/u/proj\nExited with code 3 after 1h02m.\n"
                         "2 requests were denied.")
    assert n["urgency"] == 1
    assert n["icon"]
    # The server advertises actions, so an exit offers "Show log".
    assert n["actions"] == ["show-log", "Show log"]


def test_body_markup_is_escaped_when_the_server_reads_markup(served):
    d, bus = served
    notify(d, kind="exited", id="aaaaaaaaaaaa", cwd="/src/a&b<c>", exit_code=0)
    assert one_notify(d, bus)["body"].startswith("Session aaaaaaaaaaaa in /src/a&amp;b&lt;c&gt;\n")


def test_failed_is_critical(served):
    d, bus = served
    notify(d, kind="failed", id="bbbbbbbbbbbb", reason="the agent pod was evicted", duration=42)
    n = one_notify(d, bus)
    assert n["summary"] == "claude session failed"
    assert n["body"] == ("Session bbbbbbbbbbbb in /home/user/src\n"
                         "Failed after 42s: the agent pod was evicted")
    assert n["urgency"] == 2
    assert n["timeout"] == 0


def test_stopped_expiring_and_credentials(served):
    d, bus = served
    notify(d, kind="stopped", id="cccccccccccc", reason="stopped by the user", duration=90)
    n = one_notify(d, bus)
    assert (n["summary"], n["urgency"]) == ("claude session stopped", 1)
    assert "Stopped after 1m: stopped by the user." in n["body"]

    notify(d, kind="expiring", id="cccccccccccc", limit="ttl", **{"in": 600})
    n = one_notify(d, bus)
    assert n["summary"] == "claude session stops in 10m"
    assert "lifetime limit (--ttl) in 10m" in n["body"] and n["urgency"] == 1

    notify(d, kind="expiring", id="cccccccccccc", limit="idle", **{"in": 600})
    n = one_notify(d, bus)
    assert "idle limit (--idle-timeout)" in n["body"] and "uplink attach cccccccccccc" in n["body"]

    notify(d, kind="credential", agent="claude", id="cccccccccccc", reason="the token endpoint said 401")
    n = one_notify(d, bus)
    assert n["summary"] == "claude credentials could not be refreshed"
    assert n["body"] == "Session cccccccccccc: the token endpoint said 401"
    assert n["urgency"] == 2
    assert n["actions"] == []


def test_denied_bursts_are_rate_limited(served):
    d, bus = served
    sent = [notify(d, kind="denied", id="dddddddddddd", what=f"GET evil.example/{i}")["sent"]
            for i in range(5)]
    assert sent == [True, False, False, False, False]
    n = one_notify(d, bus)
    assert n["summary"] == "Requests denied in session dddddddddddd"
    assert n["body"] == "Session dddddddddddd: a request was denied: GET evil.example/0"
    assert n["urgency"] == 1
    # Another session has its own minute.
    assert notify(d, kind="denied", id="eeeeeeeeeeee")["sent"] is True
    one_notify(d, bus)
    # Denials counted while muted show up in that session's exit notification.
    notify(d, kind="exited", id="dddddddddddd", exit_code=0)
    assert "5 requests were denied." in one_notify(d, bus)["body"]


def test_show_log_action_opens_the_terminal(tmpdir_short, bus):
    bus.start_server()
    out = tmpdir_short / "term.out"
    term = tmpdir_short / "term.sh"
    term.write_text(f"#!/bin/sh\necho \"$@\" > {out}.part && mv {out}.part {out}\n")
    term.chmod(0o755)
    d = start_daemon(tmpdir_short, {**bus.env(), "TERMINAL": str(term)})
    try:
        notify(d, kind="exited", id="ffffffffffff", exit_code=0)
        # Once the mock has logged the call it has sent its reply (with the id), and the signal
        # it emits after that reaches uplinkd after the reply: no wait for the daemon to read it.
        wait_for(lambda: bus.notify_calls(), what="the Notify")
        bus.server().EmitSignal(NAME, "ActionInvoked", "us", [dbus.UInt32(1), "show-log"],
                                dbus_interface=MOCK)
        # The terminal stand-in renames its output into place when it has written it all.
        wait_for(out.exists, what="$TERMINAL to run")
        assert out.read_text().strip() == "-e uplink logs ffffffffffff"
    finally:
        stop_daemon(d)


def test_terminal_still_open_when_the_daemon_stops(tmpdir_short, bus):
    """The log's terminal may outlive uplinkd: its handle is closed and freed at the end (the
    ASan build fails on a leak), and the terminal goes on."""
    bus.start_server()
    out = tmpdir_short / "term.pid"
    term = tmpdir_short / "term.sh"
    term.write_text(f"#!/bin/sh\necho $$ > {out}.part && mv {out}.part {out}\nexec sleep 60\n")
    term.chmod(0o755)
    d = start_daemon(tmpdir_short, {**bus.env(), "TERMINAL": str(term)})
    try:
        notify(d, kind="exited", id="ffffffffffff", exit_code=0)
        wait_for(lambda: bus.notify_calls(), what="the Notify")
        bus.server().EmitSignal(NAME, "ActionInvoked", "us", [dbus.UInt32(1), "show-log"],
                                dbus_interface=MOCK)
        wait_for(out.exists, what="$TERMINAL to run")
    finally:
        stop_daemon(d)
        if out.exists():
            pid = int(out.read_text())
            os.kill(pid, 0)  # still running: uplinkd did not take it down
            os.kill(pid, 15)


def test_no_actions_means_no_show_log(tmpdir_short, bus):
    bus.start_server(caps="body")
    d = start_daemon(tmpdir_short, bus.env())
    try:
        # Notifications wait in uplinkd until GetCapabilities is answered: no wait for it here.
        notify(d, kind="exited", id="aaaaaaaaaaaa", cwd="/src/a&b", exit_code=0)
        n = one_notify(d, bus)
        assert n["actions"] == []
        assert n["body"].startswith("Session aaaaaaaaaaaa in /src/a&b\n")  # no markup: as is
    finally:
        stop_daemon(d)


def test_no_server_logs_once(tmpdir_short, bus):
    d = start_daemon(tmpdir_short, bus.env())
    try:
        for kind in ("exited", "failed", "denied"):
            notify(d, kind=kind, reason="boom")
        wait_for(lambda: d.logs().count("Notification: ") >= 3, what="the notifications in the log")
        assert d.logs().count("No desktop notification server answers") == 1
        assert "Notification: claude session failed: Session 0123456789ab" in d.logs()
        assert d.answers()
    finally:
        stop_daemon(d)


@pytest.mark.parametrize("bus_env,drop", [
    ({"DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"}, ()),
    # No address: sd-bus tries $XDG_RUNTIME_DIR/bus, which is not there.
    ({}, ("DBUS_SESSION_BUS_ADDRESS",)),
], ids=["address-nowhere", "runtime-dir-without-bus"])
def test_no_bus_at_all(tmpdir_short, bus_env, drop):
    d = start_daemon(tmpdir_short, bus_env, drop=drop)
    try:
        for kind in ("exited", "failed", "stopped", "credential", "denied"):
            assert notify(d, kind=kind)["backend"] == "log"
        wait_for(lambda: d.logs().count("Notification: ") >= 5, what="the notifications in the log")
        assert d.logs().count("No user D-Bus") == 1
        assert d.client("status").returncode == 0
    finally:
        stop_daemon(d)


def test_notifications_off(tmpdir_short, bus):
    bus.start_server()
    d = start_daemon(tmpdir_short, {**bus.env(), "UPLINK_NOTIFICATIONS": "0"})
    try:
        res = notify(d, kind="failed")
        assert res == {"sent": False, "backend": "off"}
        # Off means no bus connection at all, so no Notify can be on its way: the daemon has
        # not even asked the mock for its capabilities.
        assert bus.notify_calls() == []
        assert bus.server().GetMethodCalls("GetCapabilities", dbus_interface=MOCK) == []
    finally:
        stop_daemon(d)


def test_debug_methods_need_the_env(tmpdir_short):
    d = Daemon(tmpdir_short, env={"KUBECONFIG": "/nonexistent"}).start()
    try:
        with d.rpc() as c:
            for m, p in (("debug.notify", {"kind": "exited"}), ("debug.block", {"ms": 1})):
                with pytest.raises(RpcError) as e:
                    c.call(m, p)
                assert e.value.name == "METHOD_NOT_FOUND"
    finally:
        stop_daemon(d)


def test_bad_debug_params(tmpdir_short):
    d = start_daemon(tmpdir_short, {"DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"})
    try:
        with d.rpc() as c:
            for m, p in (("debug.notify", {"kind": "party"}), ("debug.block", {"ms": -1}),
                         ("debug.block", {"ms": 10 ** 9})):
                with pytest.raises(RpcError) as e:
                    c.call(m, p)
                assert e.value.name == "INVALID_PARAMS"
    finally:
        stop_daemon(d)


def pings(d):
    return [m for m in d.notify.drain() if "WATCHDOG=1" in m.split("\n")]


def test_watchdog_stops_while_the_loop_is_blocked(tmpdir_short):
    d = start_daemon(tmpdir_short, {"WATCHDOG_USEC": "200000",
                                    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"}, notify=True)
    try:
        wait_for(lambda: len(pings(d)) >= 1, timeout=5, what="a first WATCHDOG=1")
        with d.rpc(timeout=60) as c:
            mark = len(d.logs())
            c.send_raw('{"jsonrpc":"2.0","id":1,"method":"debug.block","params":{"ms":1500}}\n')
            # uplinkd logs this on its loop right before it blocks; every ping it sent before
            # is in our socket by then (a datagram is queued when it is sent).
            wait_for(lambda: "debug.block: blocking the loop" in d.logs()[mark:], what="the block")
            pings(d)
            d.notify.messages.clear()
            assert c.recv_msg()["result"] == {"blocked_ms": 1500}
            # The reply is written before the loop runs its timers again, but the ping that
            # follows may be here before we look: at most that one, where a pinging thread would
            # have sent one every 100 ms of the block.
            assert len(pings(d)) <= 1, "WATCHDOG=1 arrived while the loop was blocked"
        d.notify.messages.clear()
        wait_for(lambda: len(pings(d)) >= 3, timeout=5, what="the pings to come back")
    finally:
        stop_daemon(d)


# ---- questions: the four actions of a held request (debug.ask asks one and answers with
# what the user chose: once, session, always, deny, or none)

QUESTION_ACTIONS = ["allow-once", "Allow once", "allow-session", "Allow for this session",
                    "always", "Always (save)", "deny", "Deny"]
ASK_SUMMARY = "claude in ~/code/x wants POST api.github.com/repos/o/r/pulls"
ASK_BODY = "Session aaaaaaaaaaaa: POST https://api.github.com/repos/o/r/pulls?a=1&b=<2>"


def ask(d, summary=ASK_SUMMARY, body=ASK_BODY):
    """Sends debug.ask on a connection of its own; the reply comes when it is answered."""
    c = d.rpc(timeout=60)
    c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "debug.ask",
                           "params": {"summary": summary, "body": body}}) + "\n")
    return c


def answer_of(c):
    msg = c.recv_msg()
    c.close()
    assert "result" in msg, msg
    return msg["result"]["answer"]


def shown_question(bus, summary=ASK_SUMMARY):
    """The question's Notify, and the id the mock gave it."""
    return bus.shown(lambda n: n["summary"] == summary, what="the question's Notify")


def emit(bus, member, sig, args):
    bus.emit(member, sig, args)


def forged_signal(bus, member, sig, args):
    """The same signal, sent by another client of the bus than the notification server."""
    msg = dbus.lowlevel.SignalMessage(PATH, NAME, member)
    msg.append(*args, signature=sig)
    bus.connect().send_message(msg)
    bus.connect().flush()


@pytest.mark.parametrize("key,answer", [("allow-once", "once"), ("allow-session", "session"),
                                        ("always", "always"), ("deny", "deny")])
def test_question_action_answers_once(served, key, answer):
    d, bus = served
    c = ask(d)
    nid, n = shown_question(bus)
    assert n["actions"] == QUESTION_ACTIONS
    assert n["body"] == ("Session aaaaaaaaaaaa: POST https://api.github.com/repos/o/r/pulls"
                         "?a=1&amp;b=&lt;2&gt;")
    assert (n["urgency"], n["timeout"]) == (2, 0)
    other = "allow-once" if key == "deny" else "deny"
    # neither another notification's action nor a signal another client forges counts
    emit(bus, "ActionInvoked", "us", [dbus.UInt32(nid + 100), other])
    forged_signal(bus, "ActionInvoked", "us", [dbus.UInt32(nid), other])
    forged_signal(bus, "NotificationClosed", "uu", [dbus.UInt32(nid), dbus.UInt32(2)])
    emit(bus, "ActionInvoked", "us", [dbus.UInt32(nid), key])
    # servers close a notification after its action: that closing is no second answer
    emit(bus, "NotificationClosed", "uu", [dbus.UInt32(nid), dbus.UInt32(2)])
    assert answer_of(c) == answer
    # a second question, answered after those signals: once it is, they have all been read
    c2 = ask(d, summary="second")
    nid2, _ = shown_question(bus, "second")
    emit(bus, "ActionInvoked", "us", [dbus.UInt32(nid2), "deny"])
    assert answer_of(c2) == "deny"
    assert d.logs().count("debug.ask: the answer is") == 2


def test_dismissed_question_is_no_answer(served):
    d, bus = served
    c = ask(d)
    nid, _ = shown_question(bus)
    emit(bus, "ActionInvoked", "us", [dbus.UInt32(nid), "default"])  # no such action: ignored
    emit(bus, "NotificationClosed", "uu", [dbus.UInt32(nid), dbus.UInt32(2)])  # dismissed
    assert answer_of(c) == "none"


def test_server_without_actions_is_no_answer_at_once(tmpdir_short, bus):
    bus.start_server(caps="body body-markup")
    d = start_daemon(tmpdir_short, bus.env())
    try:
        assert answer_of(ask(d)) == "none"
        assert [n for n in barrier(d, bus) if n["summary"] == ASK_SUMMARY] == []
    finally:
        stop_daemon(d)


def test_withdrawn_question_is_closed_on_the_server(served):
    d, bus = served
    c = ask(d)
    nid, _ = shown_question(bus)
    c.close()  # the client leaves: the debug method withdraws the question
    wait_for(lambda: [int(a[0]) for _t, a in bus.server().GetMethodCalls(
        "CloseNotification", dbus_interface=MOCK)] == [nid], what="CloseNotification")
    # the mock answers it with NotificationClosed, which finds no question any more
    answered = ask(d, summary="after")
    nid2, _ = shown_question(bus, "after")
    emit(bus, "ActionInvoked", "us", [dbus.UInt32(nid2), "allow-once"])
    assert answer_of(answered) == "once"
    assert "the question is withdrawn" in d.logs()
    assert d.logs().count("debug.ask: the answer is") == 1


def test_open_question_when_the_daemon_stops(served):
    d, bus = served
    c = ask(d)
    shown_question(bus)
    # stop_daemon (the fixture) checks the exit status and that nothing was left open
    c.close()


@pytest.mark.parametrize("env,backend", [({"UPLINK_NOTIFIER": "log"}, "log"),
                                         ({"DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"}, "log"),
                                         ({"UPLINK_NOTIFICATIONS": "0"}, "off")],
                         ids=["log", "no-bus", "off"])
def test_question_without_a_desktop(tmpdir_short, bus, env, backend):
    bus.start_server()
    d = start_daemon(tmpdir_short, {**bus.env(), **env})
    try:
        c = ask(d)
        msg = c.recv_msg()
        c.close()
        assert msg["result"] == {"answer": None if backend == "off" else "none", "backend": backend}
        if backend == "log":
            assert "question, no buttons in a log (uplink approvals answers it): " + ASK_SUMMARY \
                in d.logs()
    finally:
        stop_daemon(d)
