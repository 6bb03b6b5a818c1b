"""A locked collection gives the documented error (its own keyring: unlocking needs a prompt)."""

def test_locked_collection(rules_daemon, keyring, rules_file):
    keyring.set("LockedSvc", "u", "uplink-sentinel-locked")
    f = rules_file("rules:\n  - name: api\n    hosts: [x]\n    inject:\n      headers:\n"
                   "        Authorization: '{{keyring:LockedSvc:u}}'\n")
    r = rules_daemon.client("rules", "render", "--rules", str(f), "--show-secrets")
    assert r.returncode == 0 and "uplink-sentinel-locked" in r.stdout
    keyring.lock()
    r = rules_daemon.client("rules", "render", "--rules", str(f), "--show-secrets")
    assert r.returncode == 2
    assert r.stderr == (
        f"uplink: rule 'api' ({f}:2), header 'Authorization': the keyring holding "
        "service='LockedSvc' username='u' is locked; unlock it (log in to the desktop session, "
        "or run: gnome-keyring-daemon --unlock) and retry\n")
    assert "uplink-sentinel" not in r.stdout
    # a missing entry while locked is reported as locked: it may only be hidden
    f2 = rules_file("rules:\n  - name: b\n    hosts: [x]\n    inject:\n      headers:\n"
                    "        A: '{{keyring:Other:u}}'\n")
    r = rules_daemon.client("rules", "render", "--rules", str(f2))
    assert r.returncode == 2 and "is locked" in r.stderr
