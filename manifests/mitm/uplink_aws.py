"""uplink filter addon: AWS SigV4 re-signing, credential actions, the credentials map.

Loaded by filter.py, which sets ``rules`` (uplink_rules.py) first (see README.md).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from urllib.parse import quote, unquote, unquote_plus, unquote_to_bytes

# filter.py loads this file by path and sets ``rules`` (uplink_rules.py) in it first.
RulesError, _load_json = rules.RulesError, rules._load_json  # noqa: F821


_REGION_RE = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
_SIGNING_NAME = {"bedrock-runtime": "bedrock", "bedrock-agent-runtime": "bedrock",
                 "s3-control": "s3", "s3-accesspoint": "s3", "s3-fips": "s3", "email": "ses"}
_SIGV4_AUTH_RE = re.compile(r"\s*AWS4-HMAC-SHA256\s+Credential=([A-Za-z0-9]+)/", re.IGNORECASE)
_STRIP = ("authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256")
_UNSIGNED_HEADERS = frozenset(("authorization", "user-agent", "x-amzn-trace-id", "connection",
                               "proxy-connection", "proxy-authenticate", "proxy-authorization",
                               "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
                               "expect"))
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_S3_KEEP_PAYLOAD = frozenset((UNSIGNED_PAYLOAD, "STREAMING-UNSIGNED-PAYLOAD-TRAILER"))
_CRED_KEYS = {"access_key_id", "secret_access_key", "session_token", "expiration"}
# Actions that hand out credentials (keys, session tokens, sign-in, auth or registry tokens,
# passwords). A request for one, signed with a dummy key, is re-signed only under a rule that
# lists it in aws_allow_credential_actions (compared case-insensitively).
AWS_CREDENTIAL_ACTIONS = frozenset(a.lower() for a in (
    "AssumeRole", "AssumeRoleWithSAML", "AssumeRoleWithWebIdentity", "AssumeRoot",   # STS
    "GetSessionToken", "GetFederationToken", "GetServiceBearerToken", "GetWebIdentityToken",
    "CreateAccessKey", "UpdateAccessKey", "CreateLoginProfile", "UpdateLoginProfile",  # IAM
    "CreateServiceSpecificCredential", "ResetServiceSpecificCredential",
    "UploadSSHPublicKey", "UploadSigningCertificate",
    "GetSigninToken", "GetRoleCredentials", "CreateToken", "CreateTokenWithIAM",  # sign-in, SSO
    "GetCredentialsForIdentity", "GetOpenIdToken", "GetOpenIdTokenForDeveloperIdentity",
    "InitiateAuth", "AdminInitiateAuth", "RespondToAuthChallenge",  # Cognito
    "AdminRespondToAuthChallenge",
    "GetAuthorizationToken", "GetClusterCredentials", "GetClusterCredentialsWithIAM",
    "GetCredentials", "CreateSession", "AssumeRoleForPodIdentity", "GetDataAccess",
    "GetTemporaryGlueTableCredentials", "GetTemporaryGluePartitionCredentials",
    "CreatePresignedDomainUrl", "CreatePresignedNotebookInstanceUrl",
))
# REST APIs whose credential action is in the path: (signing service, method or None, path
# regex, action); the smithy RPC v2 path names any operation.
_AWS_REST_ACTIONS = (
    ("codeartifact", "POST", re.compile(r"/v1/authorization-token"), "GetAuthorizationToken"),
    ("sso", None, re.compile(r"/federation/credentials"), "GetRoleCredentials"),
    ("oidc", "POST", re.compile(r"/token"), "CreateToken"),
    ("s3", None, re.compile(r"/accessgrantsinstance/dataaccess"), "GetDataAccess"),
    ("connect", None, re.compile(r"/user/federate/.*"), "GetFederationToken"),
)
_RPCV2_PATH_RE = re.compile(r"/service/[^/]+/operation/([^/]+)")


def is_aws_host(host):
    return host.endswith(".amazonaws.com")


def aws_service_region(host):
    """(signing service, region) for an ``*.amazonaws.com`` host."""
    labels = host[: -len(".amazonaws.com")].split(".")
    for i, label in enumerate(labels):
        if _REGION_RE.fullmatch(label):
            if i + 1 < len(labels):        # <name>.<region>.<service>.amazonaws.com
                service = labels[-1]
            elif i > 0 and labels[i - 1] == "dualstack" and i > 1:
                service = labels[i - 2]
            else:
                service = labels[i - 1] if i > 0 else labels[-1]
            return _SIGNING_NAME.get(service, service), label
        if label.startswith("s3-") and _REGION_RE.fullmatch(label[3:]):  # legacy s3-<region>
            return "s3", label[3:]
    return _SIGNING_NAME.get(labels[-1], labels[-1]), "us-east-1"


def _form_values(data, key):
    """The values of ``key`` in a query string or form body (bytes or str), decoded."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    out = []
    for part in data.split(b"&"):
        k, _, v = part.partition(b"=")
        if unquote_plus(k.decode("latin-1")).strip().lower() == key:
            out.append(unquote_plus(v.decode("latin-1")).strip())
    return out


def aws_actions(method, host, path, headers, body):
    """The actions a request to an AWS host asks for, as far as they can be told: the Query
    API's Action (query string or form body), X-Amz-Target, and the REST paths of
    _AWS_REST_ACTIONS. ``body`` is None when it is not known yet (streamed S3)."""
    raw_path, _, query = path.partition("?")
    found = _form_values(query, "action")
    if body:
        found += _form_values(body, "action")
    if hasattr(headers, "get_all"):
        targets = headers.get_all("x-amz-target")
    else:
        targets = [v for k, v in headers if k.lower() == "x-amz-target"]
    found += [t.rsplit(".", 1)[-1].strip() for t in targets]
    service, _ = aws_service_region(host)
    # as a lenient router reads it: dot segments gone, repeated slashes one
    norm = re.sub("//+", "/", _remove_dot_segments(unquote(raw_path))).rstrip("/") or "/"
    for svc, verb, rx, action in _AWS_REST_ACTIONS:
        if svc == service and verb in (None, method.upper()) and rx.fullmatch(norm):
            found.append(action)
    m = _RPCV2_PATH_RE.fullmatch(norm)
    if m:
        found.append(m.group(1))
    if "s3express" in host and "session" in [k.lower() for k in _query_keys(query)]:
        found.append("CreateSession")
    return found


def _bodies(req):
    """The body as sent and, when it has a Content-Encoding mitmproxy can undo, decoded too
    (an origin that decompresses must not read an action the check did not see)."""
    raw = req.raw_content or b""
    try:
        decoded = req.get_content(strict=False) or b""
    except Exception:  # noqa: BLE001 - undecodable: the raw bytes are all there is
        decoded = raw
    return raw if decoded == raw else raw + b"&" + decoded


def _query_keys(query):
    return [unquote_plus(p.partition("=")[0]) for p in query.split("&") if p]


def aws_credential_action(method, host, path, headers, body, allowed):
    """The first credential-issuing action the request asks for that ``allowed`` (lower-case
    names) does not list, or None."""
    for action in aws_actions(method, host, path, headers, body):
        if action.lower() in AWS_CREDENTIAL_ACTIONS and action.lower() not in allowed:
            return action
    return None


def parse_aws_creds(text):
    """Parse the credentials map: dummy access key id -> real credentials."""
    doc = _load_json(text) if isinstance(text, (str, bytes)) else text
    if not isinstance(doc, dict):
        raise RulesError("the AWS credentials map must be a JSON object")
    out = {}
    for akid, entry in doc.items():
        if not re.fullmatch(r"[A-Z0-9]{16,128}", akid):
            raise RulesError(f"'{akid}' is not an access key id")
        if not isinstance(entry, dict):
            raise RulesError(f"'{akid}': the entry must be an object")
        unknown = sorted(set(entry) - _CRED_KEYS)
        if unknown:
            raise RulesError(f"'{akid}': unknown key '{unknown[0]}'")
        for key in ("access_key_id", "secret_access_key"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise RulesError(f"'{akid}': '{key}' must be a non-empty string")
        token = entry.get("session_token") or None
        if token is not None and not isinstance(token, str):
            raise RulesError(f"'{akid}': 'session_token' must be a string")
        out[akid] = (entry["access_key_id"], entry["secret_access_key"], token)
    return out


def _remove_dot_segments(path):
    out = []
    for seg in path.split("/"):
        if seg == "..":
            if len(out) > 1:
                out.pop()
        elif seg != ".":
            out.append(seg)
    res = "/".join(out)
    if path.endswith(("/.", "/..")):
        res += "/"
    return res if res.startswith("/") else "/" + res


def _raw(s):
    """The bytes a str from mitmproxy stands for (it decodes invalid UTF-8 with
    surrogateescape; a strict encode would raise)."""
    return s.encode("utf-8", "surrogateescape")


def _uri_encode(b):
    return quote(b, safe="-_.~")


def _canonical_query(query):
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        pairs.append((_uri_encode(unquote_to_bytes(_raw(key))),
                      _uri_encode(unquote_to_bytes(_raw(value)))))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def _hmac(key, msg):
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def sigv4_sign(method, path, headers, *, host, service, region, access_key, secret_key,
               session_token, payload_hash, amz_date, s3):
    """Sign a request; return the headers to set, in order: Authorization, X-Amz-Date,
    X-Amz-Content-SHA256 and, with a session token, X-Amz-Security-Token.

    ``path`` is the request target as sent (path plus query), ``headers`` the
    request's (name, value) pairs, ``amz_date`` ``YYYYMMDDTHHMMSSZ``.
    """
    raw_path, _, query = path.partition("?")
    uri = raw_path or "/"
    if not s3:
        uri = quote(_raw(_remove_dot_segments(uri)), safe="/~")
    added = [("x-amz-date", amz_date), ("x-amz-content-sha256", payload_hash)]
    if session_token:
        added.append(("x-amz-security-token", session_token))
    groups = {"host": [host]}
    for name, value in headers:
        lname = name.lower()
        if lname in _UNSIGNED_HEADERS or lname == "host" or lname in _STRIP:
            continue
        groups.setdefault(lname, []).append(value)
    for lname, value in added:
        groups[lname] = [value]
    names = sorted(groups)
    canon_headers = "".join(
        f"{n}:{','.join(' '.join(v.split()) for v in groups[n])}\n" for n in names)
    signed = ";".join(names)
    creq = "\n".join((method.upper(), uri, _canonical_query(query), canon_headers, signed,
                      payload_hash))
    date = amz_date[:8]
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(("AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(_raw(creq)).hexdigest()))
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    sig = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    out = [("Authorization", f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                             f"SignedHeaders={signed}, Signature={sig}"),
           ("X-Amz-Date", amz_date), ("X-Amz-Content-SHA256", payload_hash)]
    if session_token:
        out.append(("X-Amz-Security-Token", session_token))
    return out
