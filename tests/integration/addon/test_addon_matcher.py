"""The addon's policy code in-process (no proxy): document validation, matching details,
hints, streaming decisions, the file watcher, and importing without mitmproxy."""

import json
import os
import subprocess
import sys
import time

import pytest

from addon_support import FILTER, load_filter

F = load_filter()


def doc(*rules, **top):
    return json.dumps({"version": 1, "rules": list(rules), **top})


def rule(**kw):
    return {"name": "r", "layer": "user", "hosts": ["a\\.test"], **kw}


@pytest.mark.parametrize("text,message", [
    ("", "not valid JSON"),
    ("[]", "the document must be a JSON object"),
    (json.dumps({"rules": []}), "unsupported format version None"),
    (json.dumps({"version": "1", "rules": []}), "unsupported format version '1'"),
    (json.dumps({"version": True, "rules": []}), "unsupported format version True"),
    (json.dumps({"version": 1}), "'rules' must be a list"),
    (doc(extra=1), "unknown top-level key 'extra'"),
    ('{"version": 1, "version": 1, "rules": []}', "duplicate key 'version'"),
    (doc("x"), "rules[0]: a rule must be an object"),
    (doc(rule(name="")), "rules[0]: 'name' must be a non-empty string"),
    (doc(rule(layer=None)), "rules[0]: 'layer' must be a non-empty string"),
    (doc(rule(method=["GET"])), "rules[0]: unknown key 'method'"),
    (doc(rule(source=3)), "rules[0] 'r': 'source' must be a string"),
    (doc({"name": "r", "layer": "user"}), "rules[0] 'r': missing 'hosts'"),
    (doc(rule(hosts=[])), "rules[0] 'r': 'hosts' is an empty list"),
    (doc(rule(hosts="a")), "rules[0] 'r': 'hosts' must be a list of strings"),
    (doc(rule(hosts=["a["])), "rules[0] 'r': invalid host regex 'a['"),
    (doc(rule(paths=[])), "rules[0] 'r': 'paths' is an empty list"),
    (doc(rule(paths=["/(x"])), "rules[0] 'r': invalid path regex '/(x'"),
    (doc(rule(methods=["get"])), "rules[0] 'r': invalid method 'get'"),
    (doc(rule(methods="GET")), "rules[0] 'r': 'methods' must be a list of strings"),
    (doc(rule(inject={"Authorization": "x"})), "'inject' must be an object with only 'headers' and"),
    (doc(rule(inject={"headers": []})), "'inject.headers' must be an object"),
    (doc(rule(inject={"remove": "Authorization"})), "'inject.remove' must be a list of header"),
    (doc(rule(inject={"remove": [3]})), "'inject.remove' must be a list of header"),
    (doc(rule(inject={"remove": ["Bad Name"]})), "header name 'Bad Name' is not a valid"),
    (doc(rule(l4_forward=True, inject={"remove": ["X-A"]})), "an l4_forward rule cannot set 'inject'"),
    (doc(rule(inject={"headers": {"Bad Name": "x"}})), "header name 'Bad Name' is not a valid"),
    (doc(rule(inject={"headers": {"X-A": 1}})), "value of header 'X-A' must be a string"),
    (doc(rule(inject={"headers": {"X-A": "a\nb"}})), "value of header 'X-A' must be a string"),
    (doc(rule(inject={"headers": {"X-A": "\u20ac"}})), "value of header 'X-A' must be a string"),
    (doc(rule(inject={"headers": {"X-A": "a", "x-a": "b"}})), "header 'x-a' is given twice"),
    (doc(rule(cidrs=["10.0.0.0/8"])), "'cidrs' is only valid with l4_forward"),
    (doc(rule(l4_forward="yes")), "'l4_forward' must be true or false"),
    (doc({"name": "t", "layer": "user", "l4_forward": True}),
     "an l4_forward rule needs 'hosts' and/or 'cidrs'"),
    (doc(rule(l4_forward=True, methods=["GET"])), "an l4_forward rule cannot set 'methods'"),
    (doc(rule(l4_forward=True, paths=["/"])), "an l4_forward rule cannot set 'paths'"),
    (doc(rule(l4_forward=True, inject={"headers": {}})), "an l4_forward rule cannot set 'inject'"),
    (doc(rule(l4_forward=True, cidrs=["10.0.0.300/8"])), "invalid CIDR"),
    (doc(rule(l4_forward=True, cidrs=[])), "'cidrs' is an empty list"),
    (doc(rule(port="443")), "'port' must be a port number (1 to 65535)"),
    (doc(rule(port=0)), "'port' must be a port number (1 to 65535)"),
    (doc(rule(port=True)), "'port' must be a port number (1 to 65535)"),
    (doc(rule(l4_forward=True, port=22)), "an l4_forward rule cannot set 'port'"),
])
def test_invalid_documents(text, message):
    with pytest.raises(F.RulesError) as e:
        F.parse_rules(text)
    assert message in str(e.value)


def test_error_never_contains_header_value():
    with pytest.raises(F.RulesError) as e:
        F.parse_rules(doc(rule(inject={"headers": {"Authorization": "s3cr3t\r\nX: y"}})))
    assert "s3cr3t" not in str(e.value)


def test_valid_document_details():
    rs = F.parse_rules(doc(
        rule(name="a", methods=[], paths=["/x"], inject={"headers": {"X-A": "v\tw"}},
             source="f.yaml:3"),
        {"name": "t", "layer": "user", "l4_forward": True, "cidrs": ["192.168.149.50/24"]}))
    a, t = rs.rules
    assert a.methods is None and a.source == "f.yaml:3" and a.headers == (("X-A", "v\tw"),)
    assert str(t.cidrs[0]) == "192.168.149.0/24" and rs.n_l4 == 1 and len(rs) == 2


def test_port_narrows_a_rule_to_one_port():
    rs = F.parse_rules(doc(rule(name="kube", hosts=["api\\.k8s\\.test"], port=6443),
                           rule(name="any", hosts=["api\\.k8s\\.test"], methods=["GET"])))
    assert rs.match_request("POST", "api.k8s.test", "/x", 6443).name == "kube"
    assert rs.match_request("POST", "api.k8s.test", "/x", 443) is None
    assert rs.match_request("GET", "api.k8s.test", "/x", 443).name == "any"
    assert rs.match_request("POST", "api.k8s.test", "/x").name == "kube"  # no port given: not narrowed


def test_remove_headers_parsed():
    a, b = F.parse_rules(doc(rule(name="a", inject={"remove": ["Authorization"]}),
                             rule(name="b", inject={"headers": {"X-A": "v"}}))).rules
    assert a.remove == ("Authorization",) and a.headers == ()
    assert b.remove == () and b.headers == (("X-A", "v"),)


@pytest.mark.parametrize("pattern,literal", [
    ("api\\.example\\.com", "api.example.com"),
    ("API\\.Example\\.COM", "api.example.com"),
    ("a\\-b\\.test", "a-b.test"),
    ("api.example.com", None),
    (".*\\.example\\.com", None),
    ("a\\d\\.test", None),
    ("a|b", None),
    ("x\\", None),
])
def test_literal_host_detection(pattern, literal):
    assert F._literal(pattern) == literal


def test_literal_and_regex_rules_keep_order():
    rs = F.parse_rules(doc(rule(name="re", hosts=["a\\.t.st"]),
                           rule(name="lit", hosts=["a\\.test"]),
                           rule(name="re2", hosts=["[a]\\.test"])))
    assert [r.name for r in rs.host_candidates("a.test")] == ["re", "lit", "re2"]
    assert rs.match_request("GET", "a.test", "/").name == "re"


def test_cache_is_bounded():
    rs = F.parse_rules(doc(rule(hosts=[".*"])))
    for i in range(F.HOST_CACHE_MAX + 10):
        rs.match_request("GET", f"h{i}.test", "/")
        rs.match_connect(f"h{i}.test")
    assert len(rs._host_cache) <= F.HOST_CACHE_MAX
    assert len(rs._connect_cache) <= F.HOST_CACHE_MAX


@pytest.mark.parametrize("raw,norm", [
    ("API.Example.COM", "api.example.com"),
    ("[::1]", "::1"),
    ("b\u00fccher.example", "xn--bcher-kva.example"),
    ("10.0.0.1", "10.0.0.1"),
])
def test_normalize_host(raw, norm):
    assert F.normalize_host(raw) == norm


def test_ascii_only_case_folding():
    # the Kelvin sign folds to "k" under Unicode rules but not under PCRE2/ASCII rules
    rs = F.parse_rules(doc(rule(hosts=["k\\.test"]), rule(name="p", paths=["/k"])))
    assert rs.match_request("GET", "\u212a.test", "/") is None
    assert rs.match_request("GET", "a.test", "/\u212a") is None
    assert rs.match_request("GET", "a.test", "/k").name == "p"


def test_hint_for_request_and_connect():
    h = F.deny_hint("POST", "api.example.com", "/v1/a.b?x=1")
    assert h.endswith("{name: allow-api-example-com, hosts: ['api\\.example\\.com'], "
                      "methods: [POST], paths: ['/v1/a\\.b(\\?.*)?']}")
    assert "paths: ['/v1/x']" in F.deny_hint("GET", "h", "/v1/x")
    c = F.deny_hint("CONNECT", "db.internal", None)
    assert "hosts: ['db\\.internal']" in c and "l4_forward: true" in c
    assert "''" in F.deny_hint("GET", "h", "/it's")


@pytest.mark.parametrize("headers,req,resp", [
    ({}, False, True),
    ({"content-length": "0"}, False, False),
    ({"content-length": str(1 << 20)}, False, False),
    ({"content-length": str((1 << 20) + 1)}, True, True),
    ({"content-length": "garbage"}, True, True),
    ({"content-length": "-1"}, True, True),
    ({"transfer-encoding": "chunked"}, True, True),
])
def test_stream_decisions(headers, req, resp):
    assert F.should_stream_request(headers) == req
    assert F.should_stream_response(headers) == resp


def test_watcher_keeps_last_good(tmp_path, capsys):
    path = tmp_path / "rules.json"
    path.write_text(doc(rule(name="one")))
    w = F.Watched("rules", F.parse_rules, F.RuleSet())
    assert w.set_path(str(path)) is True and w.value.rules[0].name == "one"
    assert w.poll() is None                       # unchanged
    path.write_text("{")
    assert "not valid JSON" in w.poll()
    assert w.value.rules[0].name == "one"
    assert w.poll() is None                       # the same broken file is not re-parsed
    time.sleep(0.01)
    path.write_text(doc(rule(name="two"), rule(name="three")))
    assert w.poll() is True and [r.name for r in w.value.rules] == ["two", "three"]
    os.unlink(path)
    assert "cannot read" in w.poll() and len(w.value) == 2
    assert w.poll(interval=60) is not None        # missing file: retried...
    assert w.poll(interval=60) is None            # ...but not before the interval
    err = capsys.readouterr().err
    assert err.count("not valid JSON") == 1 and "keeping the previous version" in err


def test_aws_creds_parsing():
    creds = F.parse_aws_creds(json.dumps({
        "AKIA0000000000000001": {"access_key_id": "A", "secret_access_key": "S"},
        "AKIA0000000000000002": {"access_key_id": "A", "secret_access_key": "S",
                                 "session_token": "T", "expiration": "2026-11-29T10:00:00Z"},
        "AKIA0000000000000003": {"access_key_id": "A", "secret_access_key": "S",
                                 "session_token": ""}}))
    assert creds["AKIA0000000000000001"] == ("A", "S", None)
    assert creds["AKIA0000000000000002"] == ("A", "S", "T")
    assert creds["AKIA0000000000000003"] == ("A", "S", None)
    for bad, why in [("[]", "must be a JSON object"),
                     ('{"akia": {}}', "is not an access key id"),
                     ('{"AKIA0000000000000001": {"access_key_id": "A"}}', "'secret_access_key'"),
                     ('{"AKIA0000000000000001": {"access_key_id": "A", "secret_access_key": "S",'
                      ' "token": "T"}}', "unknown key 'token'")]:
        with pytest.raises(F.RulesError, match=why):
            F.parse_aws_creds(bad)


def test_importable_without_mitmproxy():
    code = ("import sys, importlib.util; sys.modules['mitmproxy'] = None\n"
            f"spec = importlib.util.spec_from_file_location('f', {str(FILTER)!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "rs = m.parse_rules('{\"version\": 1, \"rules\": [{\"name\": \"a\", \"layer\": \"u\","
            " \"hosts\": [\"x\"]}]}')\n"
            "print(rs.evaluate('GET', 'https', 'X', '/').decision)")
    out = subprocess.run([sys.executable, "-B", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "allow"
