"""pods/proxy: GET/PUT/POST/DELETE/PATCH/HEAD /api/v1/namespaces/NS/pods/NAME[:PORT]/proxy/PATH
(also `http:NAME:PORT` and `https:NAME:PORT`), relayed to the pod as the API server relays
it: strict about the pod (404 when missing, 503 unless Running with an address), the
caller's Authorization and the hop-by-hop headers not passed on, the answer passed back as
it came (status, headers, body). An upstream that cannot be reached is a 503 Status
"error trying to reach service". Where it goes: with the docker kubelet, the pod's address
(the container's on the namespace network); without it, the address a test gave for that
pod and port (FakeKube.set_proxy_address, or POST /fakekube/pods/NS/NAME/proxy-address)."""

import http.client
import ssl

import fakekube_errors as E
from fakekube_kinds import BY_KIND

MAX_ANSWER_BYTES = 64 * 1024 * 1024
TIMEOUT_S = 60
# Not passed on (RFC 9110 hop-by-hop, and the caller's own credentials: the API server
# authenticates the caller and consumes them).
_DROP = {"authorization", "connection", "keep-alive", "proxy-authorization", "proxy-connection",
         "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length"}


def split_target(target):
    """'[scheme:]name[:port]' -> (scheme, name, port or None); ApiError when malformed."""
    parts = target.split(":")
    scheme = None
    if len(parts) == 3:
        scheme, parts = parts[0], parts[1:]
    if len(parts) > 2 or scheme not in (None, "", "http", "https") or not parts[0]:
        raise E.bad_request('invalid pod proxy target "%s"' % target)
    port = parts[1] if len(parts) == 2 and parts[1] else None
    return scheme or "http", parts[0], port


def _port_number(pod, port):
    if port is None:
        return None
    if port.isdigit():
        return int(port)
    for c in pod["spec"].get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == port:
                return int(p["containerPort"])
    raise E.ApiError(503, "ServiceUnavailable",
                     'error trying to reach service: no port named "%s" in pod' % port)


def serve(handler, ns, target, subpath):
    fk = handler.server.fk
    scheme, name, port = split_target(target)
    pod = fk.store.get(BY_KIND["Pod"], ns, name)  # 404 pods "x" not found
    st = pod.get("status") or {}
    if st.get("phase") != "Running" or not st.get("podIP"):
        raise E.ApiError(503, "ServiceUnavailable",
                         'error trying to reach service: pod "%s" is not running (phase %s)'
                         % (name, st.get("phase") or "unknown"))
    number = _port_number(pod, port) or (443 if scheme == "https" else 80)
    host, hport = fk.proxy_address(ns, name, number, st["podIP"])
    path = "/" + subpath + ("?" + handler._query_raw if handler._query_raw else "")
    headers = {k: v for k, v in handler.headers.items() if k.lower() not in _DROP}
    headers["X-Forwarded-For"] = handler.client_address[0]
    if scheme == "https":  # the API server does not check a pod's certificate
        conn = http.client.HTTPSConnection(host, hport, timeout=TIMEOUT_S,
                                           context=ssl._create_unverified_context())
    else:
        conn = http.client.HTTPConnection(host, hport, timeout=TIMEOUT_S)
    try:
        conn.request(handler.command, path, body=handler._body or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read(MAX_ANSWER_BYTES + 1)
    except (OSError, http.client.HTTPException) as e:
        raise E.ApiError(503, "ServiceUnavailable",
                         "error trying to reach service: dial tcp %s:%d: %s"
                         % (host, hport, getattr(e, "strerror", None) or e))
    finally:
        conn.close()
    if len(data) > MAX_ANSWER_BYTES:
        raise E.internal("the pod's answer is over %d bytes" % MAX_ANSWER_BYTES)
    handler.send_response(resp.status)
    for k, v in resp.getheaders():
        if k.lower() not in _DROP:
            handler.send_header(k, v)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)
