"""SigV4 re-signing: the addon's signer against botocore's SigV4Auth (an independent
implementation, used only here) for fixed credentials, time and requests; then the real
proxy re-signing requests whose signatures botocore reproduces from what the upstream
received; and the allow-list still in charge of AWS hosts."""

import datetime
import hashlib
import json
import re
import types
import uuid
from urllib.parse import urlsplit

import pytest
from botocore import auth as bauth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from addon_support import AWS_CREDS, AWS_DUMMY, AWS_DUMMY_TOKEN, load_filter, send

F = load_filter()
AK, SK = "AKIDEXAMPLE00000001", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "FwoGZXIvYXdzEXAMPLE//token="
AMZ_DATE = "20261129T093015Z"
EMPTY = hashlib.sha256(b"").hexdigest()


class _FixedDT(datetime.datetime):
    when = datetime.datetime(2026, 11, 29, 9, 30, 15)

    @classmethod
    def utcnow(cls):
        return cls.when


def botocore_auth(method, url, headers, body, service, region, ak, sk, token, amz_date, s3):
    """Authorization as botocore computes it. Non-S3 requests carry X-Amz-Content-SHA256
    (as the addon sends it), which botocore then signs and uses as the payload hash."""
    req = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    if s3:
        req.context["client_config"] = types.SimpleNamespace(
            s3={"payload_signing_enabled": False})
        signer = bauth.S3SigV4Auth(Credentials(ak, sk, token), service, region)
    else:
        signer = bauth.SigV4Auth(Credentials(ak, sk, token), service, region)
    _FixedDT.when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    saved = bauth.datetime
    bauth.datetime = types.SimpleNamespace(datetime=_FixedDT)
    try:
        signer.add_auth(req)
    finally:
        bauth.datetime = saved
    return req.headers["Authorization"], dict(req.headers)


def addon_sign(method, url, headers, body, ak=AK, sk=SK, token=None):
    parts = urlsplit(url)
    host = parts.hostname
    service, region = F.aws_service_region(host)
    s3 = service == "s3"
    payload = F.UNSIGNED_PAYLOAD if s3 else hashlib.sha256(body).hexdigest()
    path = parts.path + ("?" + parts.query if parts.query else "")
    return F.sigv4_sign(method, path, headers, host=parts.netloc, service=service,
                        region=region, access_key=ak, secret_key=sk, session_token=token,
                        payload_hash=payload, amz_date=AMZ_DATE, s3=s3), service, region, payload


CASES = {
    "s3-get": ("GET", "https://my-bucket.s3.eu-west-2.amazonaws.com/dir/key%20name.txt",
               [("Range", "bytes=0-99"), ("User-Agent", "aws-cli/2"),
                ("X-Amz-Request-Payer", "requester")], b"", None),
    "s3-put-unsigned": ("PUT", "https://my-bucket.s3.us-west-2.amazonaws.com/upload/a.bin",
                        [("Content-Type", "application/octet-stream"),
                         ("Content-Length", "11"), ("Content-MD5", "XrY7u+Ae7tCTyyK7j1rNww==")],
                        b"hello world", None),
    "bedrock-post": ("POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
                     "us.anthropic.claude-3-5-sonnet-20241022-v2%3A0/invoke",
                     [("Content-Type", "application/json"), ("Accept", "application/json"),
                      ("X-Amzn-Trace-Id", "Root=1-abc")],
                     b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":10}', None),
    "sts-query": ("GET", "https://sts.amazonaws.com/?Version=2011-06-15&Action=AssumeRole"
                  "&RoleSessionName=a%20b&RoleArn=arn%3Aaws%3Aiam%3A%3A123%3Arole%2Fx",
                  [("Accept", "*/*")], b"", None),
    "session-token": ("POST", "https://sts.us-west-2.amazonaws.com/",
                      [("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
                      b"Action=GetCallerIdentity&Version=2011-06-15", TOKEN),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_signature_equals_botocore(name):
    method, url, headers, body, token = CASES[name]
    signed, service, region, payload = addon_sign(method, url, headers, body, token=token)
    extra = [] if service == "s3" else [("X-Amz-Content-SHA256", payload)]
    expected, bheaders = botocore_auth(method, url, headers + extra, body, service, region,
                                       AK, SK, token, AMZ_DATE, service == "s3")
    got = dict(signed)
    assert got["Authorization"] == expected
    assert got["X-Amz-Date"] == AMZ_DATE == bheaders["X-Amz-Date"]
    assert got["X-Amz-Content-SHA256"] == (F.UNSIGNED_PAYLOAD if service == "s3"
                                           else hashlib.sha256(body).hexdigest())
    if token:
        assert got["X-Amz-Security-Token"] == token == bheaders["X-Amz-Security-Token"]
        assert "x-amz-security-token" in got["Authorization"]
    else:
        assert "X-Amz-Security-Token" not in got
    assert "user-agent" not in got["Authorization"] and "x-amzn-trace-id" not in got[
        "Authorization"]


def test_signature_deterministic_and_sensitive():
    method, url, headers, body, _ = CASES["bedrock-post"]
    a = dict(addon_sign(method, url, headers, body)[0])["Authorization"]
    b = dict(addon_sign(method, url, headers, body)[0])["Authorization"]
    c = dict(addon_sign(method, url, headers, body + b" ")[0])["Authorization"]
    assert a == b != c


@pytest.mark.parametrize("host,service,region", [
    ("my-bucket.s3.eu-west-2.amazonaws.com", "s3", "eu-west-2"),
    ("s3.amazonaws.com", "s3", "us-east-1"),
    ("my-bucket.s3.amazonaws.com", "s3", "us-east-1"),
    ("my-bucket.s3-us-west-2.amazonaws.com", "s3", "us-west-2"),
    ("s3.dualstack.ap-southeast-1.amazonaws.com", "s3", "ap-southeast-1"),
    ("sts.amazonaws.com", "sts", "us-east-1"),
    ("sts.us-gov-west-1.amazonaws.com", "sts", "us-gov-west-1"),
    ("iam.amazonaws.com", "iam", "us-east-1"),
    ("bedrock-runtime.us-east-1.amazonaws.com", "bedrock", "us-east-1"),
    ("bedrock-agent-runtime.eu-central-1.amazonaws.com", "bedrock", "eu-central-1"),
    ("bedrock.us-west-2.amazonaws.com", "bedrock", "us-west-2"),
    ("dynamodb.eu-west-1.amazonaws.com", "dynamodb", "eu-west-1"),
    ("abc123.execute-api.us-east-1.amazonaws.com", "execute-api", "us-east-1"),
    ("search-dom-x1.eu-west-1.es.amazonaws.com", "es", "eu-west-1"),
    ("runtime.sagemaker.us-east-2.amazonaws.com", "sagemaker", "us-east-2"),
    ("email.us-east-1.amazonaws.com", "ses", "us-east-1"),
    ("123456789012.s3-control.us-east-1.amazonaws.com", "s3", "us-east-1"),
    ("logs.il-central-1.amazonaws.com", "logs", "il-central-1"),
])
def test_service_and_region_from_host(host, service, region):
    assert F.aws_service_region(host) == (service, region)


# --------------------------------------------------------------------------- real proxy

AWS_RULES = [{"name": "aws", "layer": "user", "hosts": [".*\\.amazonaws\\.com"], "aws_sign": True},
             {"name": "minio", "layer": "user", "hosts": ["minio\\.uplink\\.test"],
              "inject": {"headers": {"X-Injected": "uplink-sentinel-minio"}}}]


def dummy_headers(akid, service="s3", region="us-east-1", payload=EMPTY):
    return [("Authorization", f"AWS4-HMAC-SHA256 Credential={akid}/20200101/{region}/{service}/"
                              "aws4_request, SignedHeaders=host;x-amz-date, Signature=" + "0" * 64),
            ("X-Amz-Date", "20200101T000000Z"), ("X-Amz-Security-Token", "dummy-token"),
            ("X-Amz-Content-SHA256", payload)]


def through_proxy(proxy, method, host, path, headers, body=b"", rules=AWS_RULES):
    tid = uuid.uuid4().hex
    with proxy.lock:
        proxy.set_rules(rules)
        n_audit = len(proxy.mitm.audit())
        res = send(proxy.port, "https", host, 443, method, path,
                   headers=headers + [("X-Test-Id", tid)], body=body, trust=proxy.pki.mitm_ca)
        audit = proxy.mitm.audit()[n_audit:]
    return res, proxy.echo.find(tid), audit


def verify_like_aws(rec, akid, body):
    """Recompute the signature from what the upstream received, with botocore, using
    the headers named in SignedHeaders, as AWS does."""
    hdrs = rec["headers"]
    get = lambda n: [v for k, v in hdrs if k.lower() == n]  # noqa: E731
    [authz] = get("authorization")
    m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                     r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})", authz)
    assert m, authz
    real, date, region, service, signed_names, _ = m.groups()
    ak, sk, token = (AWS_CREDS[akid]["access_key_id"], AWS_CREDS[akid]["secret_access_key"],
                     AWS_CREDS[akid].get("session_token"))
    assert real == ak
    [amz_date] = get("x-amz-date")
    assert amz_date.startswith(date)
    signed_names = signed_names.split(";")
    keep = [(k, v) for k, v in hdrs if k.lower() in signed_names and k.lower() not in (
        "x-amz-date", "x-amz-security-token", "host")]
    if service == "s3":
        keep = [(k, v) for k, v in keep if k.lower() != "x-amz-content-sha256"]
    [host] = get("host")
    expected, _ = botocore_auth(rec["method"], f"https://{host}{rec['path']}", keep, body,
                                service, region, ak, sk, token, amz_date, service == "s3")
    assert authz == expected
    assert get("x-amz-security-token") == ([token] if token else [])
    return service, get("x-amz-content-sha256")[0]


def test_proxy_resigns_s3_get(proxy):
    res, got, audit = through_proxy(proxy, "GET", "my-bucket.s3.eu-west-2.amazonaws.com",
                                    "/dir/key.txt?versionId=3", dummy_headers(AWS_DUMMY))
    assert res.status == 200 and len(got) == 1
    service, payload = verify_like_aws(got[0], AWS_DUMMY, b"")
    assert (service, payload) == ("s3", "UNSIGNED-PAYLOAD")
    assert [(a["decision"], a["rule"], a["injected"]) for a in audit] == [("resign", "aws", [])]


def test_proxy_resigns_s3_put_streamed_unsigned(proxy):
    body = b"z" * (3 << 20)
    before = proxy.mitm.output().count("Streaming request to")
    res, got, _ = through_proxy(proxy, "PUT", "my-bucket.s3.us-west-2.amazonaws.com",
                                "/big.bin", dummy_headers(AWS_DUMMY, payload="UNSIGNED-PAYLOAD"),
                                body)
    assert res.status == 200 and got[0]["body_len"] == len(body)
    assert verify_like_aws(got[0], AWS_DUMMY, body) == ("s3", "UNSIGNED-PAYLOAD")
    assert proxy.mitm.output().count("Streaming request to") == before + 1


def test_proxy_resigns_bedrock_post_with_body_hash(proxy):
    body = b'{"anthropic_version":"bedrock-2023-05-31","messages":[]}' * 40000  # > 1 MiB
    before = proxy.mitm.output().count("Streaming request to")
    res, got, audit = through_proxy(
        proxy, "POST", "bedrock-runtime.us-east-1.amazonaws.com",
        "/model/us.anthropic.claude-3-5-sonnet-20241022-v2%3A0/invoke",
        dummy_headers(AWS_DUMMY, "bedrock") + [("Content-Type", "application/json")], body)
    assert res.status == 200 and got[0]["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert verify_like_aws(got[0], AWS_DUMMY, body) == ("bedrock",
                                                        hashlib.sha256(body).hexdigest())
    assert proxy.mitm.output().count("Streaming request to") == before, "signed body streamed"
    assert audit[0]["decision"] == "resign" and audit[0]["bytes_out"] == len(body)


def test_proxy_resigns_sts_query_with_session_token(proxy):
    res, got, _ = through_proxy(proxy, "GET", "sts.amazonaws.com",
                                "/?Action=GetCallerIdentity&Version=2011-06-15",
                                dummy_headers(AWS_DUMMY_TOKEN, "sts"))
    assert res.status == 200
    assert verify_like_aws(got[0], AWS_DUMMY_TOKEN, b"")[0] == "sts"


def test_unknown_key_is_left_alone(proxy):
    hdrs = dummy_headers("AKIAUNKNOWNUNKNOWN00")
    res, got, audit = through_proxy(proxy, "GET", "sts.amazonaws.com", "/?Action=X", hdrs)
    assert res.status == 200
    assert [v for k, v in got[0]["headers"] if k == "Authorization"] == [hdrs[0][1]]
    assert audit[0]["decision"] == "allow"
    assert "no credentials for key AKIAUNKNOWNUNKNOWN00" in proxy.mitm.stderr.read_text()


def test_non_aws_host_with_sigv4_is_not_resigned(proxy):
    hdrs = dummy_headers(AWS_DUMMY)
    res, got, audit = through_proxy(proxy, "GET", "minio.uplink.test", "/bucket/k", hdrs)
    assert res.status == 200
    assert [v for k, v in got[0]["headers"] if k == "Authorization"] == [hdrs[0][1]]
    assert audit[0]["decision"] == "allow" and audit[0]["injected"] == ["X-Injected"]


def test_signature_is_no_way_around_the_allow_list(proxy):
    rules = [{"name": "s3-only", "layer": "user", "hosts": ["s3\\.amazonaws\\.com"]},
             {"name": "ro", "layer": "generic", "hosts": [".*"], "methods": ["GET"]}]
    hdrs = dummy_headers(AWS_DUMMY, "sts")
    # a host no rule allows at all: refused at CONNECT
    res, got, audit = through_proxy(proxy, "POST", "sts.amazonaws.com", "/", hdrs,
                                    body=b"Action=GetCallerIdentity", rules=rules[:1])
    assert res.connect_status == 403 and got == []
    assert audit[0]["decision"] == "connect-refused"
    # a host whose tunnel is allowed (GET catch-all) but not this POST
    res, got, audit = through_proxy(proxy, "POST", "sts.amazonaws.com", "/", hdrs,
                                    body=b"Action=GetCallerIdentity", rules=rules)
    assert res.status == 403 and res.header("X-Uplink-Denied") == "1" and got == []
    assert audit[0]["decision"] == "deny"


# --------------------------------------------------------------------------- who may re-sign
# The agent holds a dummy key; an attacker inside it tries to have the proxy put the real
# key id, session token or a fresh credential in front of it.

GENERIC = {"name": "default-readonly", "layer": "generic", "source": "builtin:generic",
           "hosts": [".*"], "methods": ["GET", "HEAD", "OPTIONS"]}
REAL = [v for c in AWS_CREDS.values() for k, v in c.items()]


def _upstream_count(proxy):
    with proxy.echo.lock:
        return len(proxy.echo.requests)


def _no_real_credential_upstream(proxy, since):
    """Nothing the upstream received since request number ``since`` holds a real value."""
    with proxy.echo.lock:
        seen = json.dumps(proxy.echo.requests[since:])
    leaked = [v for v in REAL if v in seen]
    assert leaked == [], "real AWS credentials reached an upstream"


def _refused(res, got, audit, why):
    assert res.status == 403 and res.header("X-Uplink-Denied") == "1", res
    assert got == [], "a request the proxy must not re-sign reached the upstream"
    assert [a["decision"] for a in audit] == ["deny"]
    assert why in audit[0]["reason"] and why in res.json()["hint"]
    return audit[0]


@pytest.mark.parametrize("host,path", [
    ("abc123.execute-api.us-east-1.amazonaws.com", "/prod/steal"),   # the attacker's API
    ("sts.amazonaws.com", "/?Action=GetSessionToken&Version=2011-06-15"),
    ("iam.amazonaws.com", "/?Action=CreateAccessKey&UserName=me&Version=2010-05-08"),
])
def test_catch_all_never_resigns(proxy, host, path):
    """The default rules: only the read-only catch-all takes these hosts, and it re-signs
    nothing, so neither the real key id nor the session token goes anywhere."""
    service, since = F.aws_service_region(host)[0], _upstream_count(proxy)
    res, got, audit = through_proxy(proxy, "GET", host, path,
                                    dummy_headers(AWS_DUMMY_TOKEN, service), rules=[GENERIC])
    line = _refused(res, got, audit, "does not re-sign AWS requests")
    assert (line["rule"], line["layer"]) == ("default-readonly", "generic")
    _no_real_credential_upstream(proxy, since)


def test_generic_rule_cannot_claim_aws_sign(proxy):
    """A rules document that marks a generic-layer rule as re-signing is not loaded."""
    with pytest.raises(F.RulesError, match="generic-layer rule cannot set 'aws_sign'"):
        F.parse_rules({"version": 1, "rules": [dict(GENERIC, aws_sign=True)]})


STS_RULE = {"name": "aws-sts", "layer": "user", "hosts": ["sts\\.amazonaws\\.com"],
            "methods": ["GET", "POST"], "aws_sign": True}
FORM = [("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")]


@pytest.mark.parametrize("method,path,extra,body", [
    ("GET", "/?Action=GetSessionToken&Version=2011-06-15", [], b""),
    ("GET", "/?Version=2011-06-15&%41ction=AssumeRole&RoleArn=x&RoleSessionName=y", [], b""),
    ("POST", "/", FORM, b"Action=GetSessionToken&Version=2011-06-15"),
    ("POST", "/", FORM, b"Version=2011-06-15&Action=GetFederationToken&Name=x"),
    ("POST", "/?Action=GetCallerIdentity", FORM, b"Action=AssumeRole&RoleArn=x"),
    ("POST", "/", [("Content-Type", "application/x-amz-json-1.1"),
                   ("X-Amz-Target", "AWSSecurityTokenServiceV20110615.AssumeRole")], b"{}"),
])
def test_credential_actions_refused(proxy, method, path, extra, body):
    """Under a rule that re-signs STS, the actions that hand out credentials are refused
    (query string, form body, X-Amz-Target) unless the rule names them."""
    since = _upstream_count(proxy)
    res, got, audit = through_proxy(proxy, method, "sts.amazonaws.com", path,
                                    dummy_headers(AWS_DUMMY_TOKEN, "sts") + extra, body,
                                    rules=[STS_RULE, GENERIC])
    line = _refused(res, got, audit, "hands out AWS credentials")
    assert "aws_allow_credential_actions" in line["reason"] and line["rule"] == "aws-sts"
    _no_real_credential_upstream(proxy, since)


def test_other_credential_apis_refused(proxy):
    rules = [{"name": "aws", "layer": "user", "hosts": [".*\\.amazonaws\\.com"],
              "aws_sign": True}]
    cases = [("POST", "iam.amazonaws.com", "/", FORM,
              b"Action=CreateAccessKey&UserName=me&Version=2010-05-08"),
             ("POST", "cognito-identity.us-east-1.amazonaws.com", "/",
              [("X-Amz-Target", "AWSCognitoIdentityService.GetCredentialsForIdentity")], b"{}"),
             ("POST", "cognito-identity.us-east-1.amazonaws.com", "/",
              [("X-Amz-Target", "AWSCognitoIdentityService.GetOpenIdToken")], b"{}"),
             ("POST", "codeartifact.eu-west-1.amazonaws.com",
              "/v1/authorization-token?domain=d&domain-owner=1", [], b""),
             ("POST", "codeartifact.eu-west-1.amazonaws.com",
              "//v1//authorization-token/?domain=d&domain-owner=1", [], b""),
             ("POST", "api.ecr.eu-west-1.amazonaws.com", "/",
              [("X-Amz-Target", "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken")],
              b"{}")]
    since = _upstream_count(proxy)
    for method, host, path, extra, body in cases:
        service = F.aws_service_region(host)[0]
        res, got, audit = through_proxy(proxy, method, host, path,
                                        dummy_headers(AWS_DUMMY, service) + extra, body,
                                        rules=rules)
        _refused(res, got, audit, "hands out AWS credentials")
    _no_real_credential_upstream(proxy, since)


def test_rule_naming_host_and_action_resigns(proxy):
    rules = [dict(STS_RULE, aws_allow_credential_actions=["GetSessionToken"]), GENERIC]
    res, got, audit = through_proxy(proxy, "GET", "sts.amazonaws.com",
                                    "/?Action=GetSessionToken&Version=2011-06-15",
                                    dummy_headers(AWS_DUMMY_TOKEN, "sts"), rules=rules)
    assert res.status == 200 and len(got) == 1
    assert verify_like_aws(got[0], AWS_DUMMY_TOKEN, b"")[0] == "sts"
    assert [(a["decision"], a["rule"]) for a in audit] == [("resign", "aws-sts")]
    body = b"Action=GetSessionToken&Version=2011-06-15"
    res, got, audit = through_proxy(proxy, "POST", "sts.amazonaws.com", "/",
                                    dummy_headers(AWS_DUMMY_TOKEN, "sts") + FORM, body,
                                    rules=rules)
    assert res.status == 200 and verify_like_aws(got[0], AWS_DUMMY_TOKEN, body)[0] == "sts"
    # naming one action allows that one only
    res, got, audit = through_proxy(proxy, "GET", "sts.amazonaws.com",
                                    "/?Action=AssumeRole&RoleArn=x&RoleSessionName=y",
                                    dummy_headers(AWS_DUMMY_TOKEN, "sts"), rules=rules)
    _refused(res, got, audit, "AssumeRole hands out AWS credentials")


@pytest.mark.parametrize("example,path,placeholder", [
    ("ecr.yaml", "/v2/team/app/manifests/latest", "Basic QVdTOnBsYWNlaG9sZGVy"),
    ("codeartifact.yaml", "/pypi/repo/simple/requests/", "Bearer placeholder"),
])
def test_shipped_token_examples_still_inject(proxy, example, path, placeholder):
    """examples/rules/ecr.yaml and codeartifact.yaml, as uplinkd renders them (their hosts
    name AWS, so they carry aws_sign): docker's and pip's requests get the token injected,
    and the placeholder the agent sent is gone."""
    import yaml
    from addon_support import ROOT
    [raw] = yaml.safe_load((ROOT / "examples" / "rules" / example).read_text())["rules"]
    assert all(h.endswith("\\.amazonaws\\.com") and "|" not in h for h in raw["hosts"])
    token = f"Bearer uplink-sentinel-{example}"
    rule = {"name": raw["name"], "layer": "user", "source": f"examples/rules/{example}:2",
            "hosts": raw["hosts"], "methods": raw["methods"], "aws_sign": True,
            "inject": {"headers": {"Authorization": token}}}
    if "paths" in raw:
        rule["paths"] = raw["paths"]
    host = raw["hosts"][0].replace("\\.", ".")
    res, got, audit = through_proxy(proxy, "GET", host, path, [("Authorization", placeholder)],
                                    rules=[rule, GENERIC])
    assert res.status == 200 and len(got) == 1
    assert [v for k, v in got[0]["headers"] if k.lower() == "authorization"] == [token]
    assert [(a["decision"], a["rule"], a["injected"]) for a in audit] == [
        ("allow", raw["name"], ["Authorization"])]


def test_compressed_form_body_is_read(proxy):
    """An action hidden in a gzip-compressed form body (an origin may decompress it) is seen."""
    import gzip
    since = _upstream_count(proxy)
    body = gzip.compress(b"Action=GetSessionToken&Version=2011-06-15")
    res, got, audit = through_proxy(proxy, "POST", "sts.amazonaws.com", "/",
                                    dummy_headers(AWS_DUMMY_TOKEN, "sts") + FORM
                                    + [("Content-Encoding", "gzip")], body,
                                    rules=[STS_RULE, GENERIC])
    _refused(res, got, audit, "GetSessionToken hands out AWS credentials")
    _no_real_credential_upstream(proxy, since)
