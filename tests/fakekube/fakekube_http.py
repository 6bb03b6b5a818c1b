"""HTTPS server and request handler of fakekube."""

import base64
import json
import socket
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

import fakekube_errors as E
import fakekube_exec
import fakekube_proxy
import fakekube_kinds as K
import fakekube_openapi
import fakekube_proto
from fakekube_selectors import (fields_match, labels_match, parse_field_selector,
                                parse_label_selector)

TABLE_CT = "application/json;as=Table;v=v1;g=meta.k8s.io"
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DropConnection(Exception):
    pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, handler, fk, sslctx):
        self.fk = fk
        self.sslctx = sslctx
        self.conns = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, handler)

    def finish_request(self, request, client_address):
        # The handler writes headers and body separately: without this, Nagle and the
        # client's delayed ACK add 40 ms to every answer, as no real API server does.
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request.settimeout(10)
        try:
            conn = self.sslctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            try:
                request.close()
            except OSError:
                pass
            return
        conn.settimeout(None)
        with self.conns_lock:
            self.conns.add(conn)
        try:
            self.RequestHandlerClass(conn, client_address, self)
        except (ConnectionError, ssl.SSLError, OSError, DropConnection):
            pass
        finally:
            with self.conns_lock:
                self.conns.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def close_all(self):
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _q1(q, name, default=None):
    v = q.get(name)
    return v[-1] if v else default


def _truthy(v):
    return v in ("1", "true", "True")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakekube/1.32"
    sys_version = ""

    def log_message(self, fmt, *args):
        if self.server.fk.verbose:
            super().log_message(fmt, *args)

    # ------------------------------------------------------------ plumbing

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def send_response(self, code, message=None):
        super().send_response(code, message)
        if getattr(self, "_logme", False):
            self._logme = False
            self.server.fk._log_request({
                "method": self.command, "path": self._path, "query": self._query_raw,
                "content_type": self.headers.get("Content-Type"), "status": code,
                "auth": self._auth, "user_agent": self.headers.get("User-Agent"),
                # the scheme of an Authorization header ("Bearer"), never its value
                "auth_scheme": (self.headers.get("Authorization") or "").partition(" ")[0] or None,
                "time": time.time(), "body": self._body_text()})

    def _body_text(self):
        b = getattr(self, "_body", b"")
        if not b or len(b) > 65536:
            return None if not b else "<%d bytes>" % len(b)
        try:
            return b.decode()
        except UnicodeDecodeError:
            return None

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                line = self.rfile.readline(65537)
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                out += self.rfile.read(n)
                self.rfile.readline(3)
            return bytes(out)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, code, body, ctype="application/json", headers=None):
        if isinstance(body, (dict, list)):
            data = (json.dumps(body, separators=(",", ":")) + "\n").encode()
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = body
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", self._audit)
        for h, v in (headers or {}).items():
            if isinstance(v, list):
                for x in v:
                    self.send_header(h, x)
            else:
                self.send_header(h, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_error(self, err):
        self._send(err.code, err.status(), headers=err.headers)

    def _warnings(self, warnings):
        return {"Warning": ['299 - "%s"' % w.replace('"', '\\"') for w in warnings]} \
            if warnings else {}

    # ------------------------------------------------------------ dispatch

    def _dispatch(self, method):
        import uuid
        self._audit = str(uuid.uuid4())
        u = urllib.parse.urlsplit(self.path)
        self._path = u.path
        self._query_raw = u.query
        self._q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        self._auth = None
        self._logme = False
        fk = self.server.fk
        try:
            self._body = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            return
        if self._path.startswith("/fakekube/"):
            try:
                self._control(method)
            except E.ApiError as e:
                self._send_error(e)
            except Exception as e:  # report instead of dropping the connection
                self._send(500, {"error": repr(e)})
            return
        self._auth = self._authenticate()
        self._logme = True
        try:
            fault = fk._take_fault(method, self._path, self._query_raw)
            if fault is not None:
                if fault.get("delay"):
                    time.sleep(float(fault["delay"]))
                if fault.get("drop"):
                    self.close_connection = True
                    self._logme = False
                    fk._log_request({"method": method, "path": self._path,
                                     "query": self._query_raw,
                                     "content_type": self.headers.get("Content-Type"),
                                     "status": 0, "auth": self._auth,
                                     "user_agent": self.headers.get("User-Agent"),
                                     "time": time.time(), "body": self._body_text()})
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault.get("status"):
                    code = int(fault["status"])
                    reason = {500: "InternalError", 503: "ServiceUnavailable",
                              429: "TooManyRequests", 504: "Timeout", 502: "",
                              401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
                              409: "Conflict", 410: "Expired"}.get(code, "")
                    msg = fault.get("message") or "fakekube: injected fault (%d)" % code
                    headers = {}
                    details = None
                    if fault.get("retry_after") is not None:
                        headers["Retry-After"] = str(fault["retry_after"])
                        details = {"retryAfterSeconds": int(fault["retry_after"])}
                    self._send(code, E.status_body(code, reason, msg, details), headers=headers)
                    return
                if fault.get("body_bytes"):
                    self._send_big(int(fault["body_bytes"]))
                    return
            if self._auth is None:
                self._auth = "anonymous"
                raise E.ApiError(401, "Unauthorized", "Unauthorized")
            self._route(method)
        except E.ApiError as e:
            self._send_error(e)
        except DropConnection:
            raise
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception as e:
            import traceback
            traceback.print_exc()
            self._send_error(E.internal("fakekube internal error: %r" % (e,)))

    def _send_big(self, n):
        head = b'{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[],"padding":"'
        tail = b'"}\n'
        pad = max(0, n - len(head) - len(tail))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(head) + pad + len(tail)))
        self.end_headers()
        self.wfile.write(head)
        chunk = b"x" * 65536
        while pad > 0:
            self.wfile.write(chunk[:min(pad, len(chunk))])
            pad -= min(pad, len(chunk))
        self.wfile.write(tail)

    def _authenticate(self):
        fk = self.server.fk
        cert = self.connection.getpeercert()
        if cert:
            cn = ""
            for rdn in cert.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
            return "cert:" + cn
        h = self.headers.get("Authorization", "")
        if h.startswith("Bearer "):
            tok = h[7:].strip()
            if fk._token_ok(tok):
                return "token:" + tok
        return None

    # ------------------------------------------------------------ routing

    def _route(self, method):
        p = self._path.rstrip("/") or "/"
        if method not in ("GET", "HEAD") and p in ("/version", "/api", "/apis", "/healthz",
                                                   "/livez", "/readyz"):
            raise E.method_not_allowed()
        if p == "/version":
            return self._send(200, K.SERVER_VERSION)
        if p in ("/healthz", "/livez", "/readyz"):
            return self._send(200, "ok", "text/plain; charset=utf-8")
        if p == "/api":
            return self._send(200, K.api_versions())
        if p == "/apis":
            return self._send(200, K.api_group_list())
        if p.startswith("/openapi/"):
            doc = fakekube_openapi.serve(p, self._q)
            if doc is None:
                raise E.not_found_path()
            return self._send(200, doc)
        parts = p.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2 and parts[1] == "v1":
            group, version, rest = "", "v1", parts[2:]
        elif parts[0] == "apis" and len(parts) >= 2:
            group = parts[1]
            if len(parts) == 2:
                if group in K.GROUPS:
                    return self._send(200, K.api_group(group))
                raise E.not_found_path()
            version, rest = parts[2], parts[3:]
        else:
            raise E.not_found_path()
        hidden = self.server.fk.hidden_kinds
        if not rest:
            rl = K.resource_list(group, version, hidden)
            if rl is None:
                raise E.not_found_path()
            return self._send(200, rl)
        ns = None
        if (rest[0] == "namespaces" and len(rest) >= 3
                and (group, version, rest[2]) in K.BY_RESOURCE):
            ns, resource, rest = rest[1], rest[2], rest[3:]
        else:
            resource, rest = rest[0], rest[1:]
        k = K.BY_RESOURCE.get((group, version, resource))
        if k is None or k.kind in hidden:
            raise E.not_found_path()
        if ns is not None and not k.namespaced:
            raise E.not_found_path()
        name = rest[0] if rest else None
        sub = rest[1] if len(rest) > 1 else None
        if k.kind == "Pod" and ns is not None and sub == "proxy":
            prefix = "/api/v1/namespaces/%s/pods/%s/proxy" % (ns, name)
            if not self._path.startswith(prefix):
                raise E.not_found_path()
            return fakekube_proxy.serve(self, ns, name, self._path[len(prefix) + 1:])
        if len(rest) > 2:
            raise E.not_found_path()
        if sub is not None and (k.kind, sub) not in (("Pod", "status"), ("Pod", "log"),
                                                     ("Pod", "exec"),
                                                     ("Deployment", "status"),
                                                     ("Service", "status"),
                                                     ("Namespace", "status"),
                                                     ("Namespace", "finalize")):
            raise E.not_found_path()
        if k.namespaced and name is not None and ns is None:
            raise E.not_found_path()
        self._resource(method, k, ns, name, sub)

    # ------------------------------------------------------------ API verbs

    def _opts(self, method, patch_type=None):
        q = self._q
        dry = q.get("dryRun") or []
        for d in dry:
            if d != "All":
                raise E.bad_request('Invalid dry run value: %s. Accepted values: "All"' % d)
        fv = _q1(q, "fieldValidation", "Warn") or "Warn"
        if fv not in ("Strict", "Warn", "Ignore"):
            raise E.bad_request('fieldValidation: Unsupported value: "%s": supported values: '
                                '"Ignore", "Strict", "Warn"' % fv)
        fm = _q1(q, "fieldManager")
        force = _q1(q, "force")
        opts_kind = {"POST": "CreateOptions", "PUT": "UpdateOptions",
                     "PATCH": "PatchOptions"}.get(method, "CreateOptions")
        causes = []
        if patch_type == "apply" and not fm:
            causes.append("fieldManager: Required value: is required for apply patch")
        if force is not None and patch_type != "apply":
            causes.append("force: Forbidden: may not be specified for non-apply patch")
        if fm is not None and len(fm) > 128:
            causes.append('fieldManager: Too long: may not be more than 128 bytes')
        if causes:
            msg = '%s.meta.k8s.io "" is invalid: ' % opts_kind
            msg += causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
            raise E.ApiError(422, "Invalid", msg,
                             {"group": "meta.k8s.io", "kind": opts_kind,
                              "causes": [{"reason": "FieldValueRequired" if "Required" in c
                                          else "FieldValueForbidden",
                                          "message": c.split(": ", 1)[1],
                                          "field": c.split(":", 1)[0]} for c in causes]})
        if not fm:
            ua = self.headers.get("User-Agent") or "unknown"
            fm = ua.split("/", 1)[0]
        return {"dry_run": bool(dry), "validation": fv, "manager": fm,
                "force": _truthy(force or "")}

    def _decode_json(self, k):
        try:
            return json.loads(self._body or b"null")
        except ValueError as e:
            raise E.bad_request("%s in version \"%s\" cannot be handled as a %s: %s"
                                % (k.kind, k.version, k.kind, _json_err(e)))

    def _want_table(self):
        return "as=Table" in (self.headers.get("Accept") or "")

    def _resource(self, method, k, ns, name, sub):
        store = self.server.fk.store
        if sub == "exec" and method in ("GET", "POST"):
            return fakekube_exec.serve(self, ns, name)
        if method in ("GET", "HEAD"):
            if name is None:
                if _truthy(_q1(self._q, "watch", "")):
                    return self._watch(k, ns)
                return self._list(k, ns)
            if sub == "log":
                return self._log(ns, name)
            obj = store.get(k, ns, name)
            if self._want_table():
                return self._send(200, K.to_table(k, [obj], obj["metadata"]["resourceVersion"],
                                                  _q1(self._q, "includeObject", "Metadata")),
                                  TABLE_CT)
            return self._send(200, obj)
        if method == "POST":
            if name is not None:
                raise E.method_not_allowed()
            if k.namespaced and ns is None:
                raise E.method_not_allowed()
            self._require_json()
            o = self._opts(method)
            w = []
            obj = store.create(k, ns, self._decode_json(k), o["validation"], o["dry_run"],
                               o["manager"], w)
            return self._send(201, obj, headers=self._warnings(w))
        if method == "PUT":
            if name is None:
                raise E.method_not_allowed()
            self._require_json()
            o = self._opts(method)
            w = []
            if sub == "finalize":
                sub = None
            obj = store.update(k, ns, name, self._decode_json(k), o["validation"],
                               o["dry_run"], o["manager"], w, subresource=sub)
            return self._send(200, obj, headers=self._warnings(w))
        if method == "PATCH":
            if name is None:
                raise E.method_not_allowed()
            ct = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            ptype = {"application/apply-patch+yaml": "apply",
                     "application/apply-patch+cbor": None,
                     "application/merge-patch+json": "merge",
                     "application/strategic-merge-patch+json": "strategic",
                     "application/json-patch+json": "json"}.get(ct)
            if ptype is None:
                raise E.ApiError(415, "UnsupportedMediaType",
                                 "the body of the request was in an unknown format - accepted "
                                 "media types include: application/json-patch+json, "
                                 "application/merge-patch+json, "
                                 "application/apply-patch+yaml, "
                                 "application/strategic-merge-patch+json")
            o = self._opts(method, ptype)
            if ptype == "apply":
                try:
                    patch = yaml.load(self._body.decode() or "null", Loader=_YAML_LOADER)
                except (yaml.YAMLError, UnicodeDecodeError) as e:
                    raise E.bad_request("error decoding YAML: %s" % str(e).replace("\n", " "))
            else:
                try:
                    patch = json.loads(self._body or b"null")
                except ValueError as e:
                    raise E.bad_request("error decoding patch: %s" % _json_err(e))
            w = []
            before = store.peek(k, ns, name)
            obj = store.patch(k, ns, name, ptype, patch, o["validation"], o["dry_run"],
                              o["manager"], o["force"], w, subresource=sub)
            code = 201 if (ptype == "apply" and before is None) else 200
            return self._send(code, obj, headers=self._warnings(w))
        if method == "DELETE":
            o = self._opts(method)
            body = {}
            if self._body:
                try:
                    body = json.loads(self._body)
                except ValueError as e:
                    raise E.bad_request("DeleteOptions: %s" % _json_err(e))
            for f in ("propagationPolicy", "gracePeriodSeconds"):
                v = _q1(self._q, f)
                if v is not None:
                    body[f] = int(v) if f == "gracePeriodSeconds" else v
            pp = body.get("propagationPolicy")
            if pp not in (None, "Orphan", "Background", "Foreground"):
                raise E.ApiError(422, "Invalid", 'DeleteOptions.meta.k8s.io "" is invalid: '
                                 'propagationPolicy: Unsupported value: "%s": supported '
                                 'values: "Foreground", "Background", "Orphan", "nil"' % pp)
            if name is None:
                return self._delete_collection(k, ns, body, o["dry_run"])
            obj, code = store.delete(k, ns, name, body, o["dry_run"])
            if obj is None or k.kind not in ("Pod", "Namespace", "Service"):
                d = {"name": name}
                if k.group:
                    d["group"] = k.group
                d["kind"] = k.resource
                d["uid"] = obj["metadata"]["uid"] if obj else ""
                return self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                        "status": "Success", "details": d})
            return self._send(code, obj)
        raise E.method_not_allowed()

    def _require_json(self):
        ct = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ct == "application/yaml":
            try:
                self._body = json.dumps(yaml.load(self._body.decode(), Loader=_YAML_LOADER)).encode()
            except (yaml.YAMLError, UnicodeDecodeError) as e:
                raise E.bad_request("error decoding YAML: %s" % e)
            return
        if ct == "application/vnd.kubernetes.protobuf":
            try:
                self._body = json.dumps(fakekube_proto.decode(self._body)).encode()
            except (fakekube_proto.ProtoError, UnicodeDecodeError):
                pass
            else:
                return
        if ct not in ("application/json", "*/*"):
            raise E.ApiError(415, "UnsupportedMediaType",
                             'the body of the request was in an unknown format - accepted '
                             'media types include: application/json, application/yaml, '
                             'application/vnd.kubernetes.protobuf, application/cbor')

    def _matcher(self, k):
        lsel = parse_label_selector(_q1(self._q, "labelSelector"))
        fsel = parse_field_selector(_q1(self._q, "fieldSelector"), k.kind)

        def match(o):
            return (labels_match(lsel, o["metadata"].get("labels"))
                    and fields_match(fsel, o))
        return match

    def _list(self, k, ns):
        store = self.server.fk.store
        match = self._matcher(k)
        rv = _q1(self._q, "resourceVersion")
        if rv not in (None, "", "0"):
            try:
                irv = int(rv)
            except ValueError:
                raise E.bad_request('resourceVersion: Invalid value: "%s": must be a valid '
                                    'resourceVersion' % rv)
            if irv > store.rv:
                raise _too_large(irv, store.rv)
        items, lrv = store.list(k, ns, match)
        limit = int(_q1(self._q, "limit", "0") or 0)
        cont = _q1(self._q, "continue")
        md = {"resourceVersion": lrv}
        if cont:
            try:
                c = json.loads(base64.urlsafe_b64decode(cont.encode() + b"=="))
                start = c["start"]
            except (ValueError, KeyError, TypeError):
                raise E.bad_request("continue key is not valid: illegal base64 data")
            items = [o for o in items
                     if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > tuple(start)]
            md["resourceVersion"] = c.get("rv", lrv)
        if limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            md["continue"] = base64.urlsafe_b64encode(json.dumps(
                {"rv": md["resourceVersion"],
                 "start": [last.get("namespace", ""), last["name"]]}).encode()).decode().rstrip("=")
            md["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        if self._want_table():
            t = K.to_table(k, items, md["resourceVersion"], _q1(self._q, "includeObject",
                                                                "Metadata"))
            t["metadata"] = md
            return self._send(200, t, TABLE_CT)
        return self._send(200, {"kind": k.kind + "List", "apiVersion": k.api_version,
                                "metadata": md, "items": items})

    def _delete_collection(self, k, ns, body, dry_run):
        store = self.server.fk.store
        items, rv = store.list(k, ns, self._matcher(k))
        out = []
        for o in items:
            try:
                obj, _ = store.delete(k, o["metadata"].get("namespace"), o["metadata"]["name"],
                                      body, dry_run)
                out.append(obj)
            except E.ApiError:
                pass
        return self._send(200, {"kind": k.kind + "List", "apiVersion": k.api_version,
                                "metadata": {"resourceVersion": str(store.rv)}, "items": out})

    # ------------------------------------------------------------ streaming

    def _start_stream(self, ctype):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", self._audit)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data):
        if not data:
            return
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _cut(self):
        self.close_connection = True
        try:
            self.wfile.flush()
        except OSError:
            pass
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _watch(self, k, ns):
        fk = self.server.fk
        store = fk.store
        lsel = parse_label_selector(_q1(self._q, "labelSelector"))
        fsel = parse_field_selector(_q1(self._q, "fieldSelector"), k.kind)

        def match(o):
            return o is not None and labels_match(lsel, o["metadata"].get("labels")) \
                and fields_match(fsel, o)

        rv = _q1(self._q, "resourceVersion")
        bookmarks = _truthy(_q1(self._q, "allowWatchBookmarks", ""))
        timeout = _q1(self._q, "timeoutSeconds")
        deadline = time.monotonic() + (float(timeout) if timeout else 1e9)
        table = self._want_table()
        include = _q1(self._q, "includeObject", "Metadata")
        initial = []
        with store.cond:
            if rv in (None, "", "0"):
                items, lrv = store.list(k, ns, match)
                initial = items
                last = int(lrv)
                expired = None
            else:
                try:
                    last = int(rv)
                except ValueError:
                    raise E.bad_request('resourceVersion: Invalid value: "%s": must be a valid '
                                        'resourceVersion' % rv)
                if last > store.rv:
                    raise _too_large(last, store.rv)
                expired = None if store.events_after(last) is not None else (
                    last, store.compacted_rv)
            gen = store.cut_gen
        self._start_stream(TABLE_CT if table else "application/json")

        def send(typ, obj):
            if table and typ != "BOOKMARK" and typ != "ERROR":
                obj = K.to_table(k, [obj], obj["metadata"]["resourceVersion"], include)
            self._chunk((json.dumps({"type": typ, "object": obj}, separators=(",", ":"))
                         + "\n").encode())

        if expired:
            send("ERROR", _expired(*expired))
            self._end_stream()
            return
        for o in initial:
            send("ADDED", o)
        next_bm = time.monotonic() + fk.bookmark_interval
        while True:
            with store.cond:
                while True:
                    if store.stopping:
                        self._cut()
                        return
                    if store.cut_gen != gen:
                        graceful = store.cut_graceful
                        break
                    evs = store.events_after(last)
                    if evs is None or evs:
                        break
                    now = time.monotonic()
                    if now >= deadline or (bookmarks and now >= next_bm):
                        break
                    store.cond.wait(min(deadline, next_bm if bookmarks else deadline) - now)
                cur_rv = store.rv
                cut = store.cut_gen != gen
                cmp_rv = store.compacted_rv
            if cut:
                if graceful:
                    self._end_stream()
                else:
                    self._cut()
                return
            if evs is None:
                send("ERROR", _expired(last, cmp_rv))
                self._end_stream()
                return
            for (erv, typ, kind, ens, obj, old) in evs:
                last = erv
                if kind != k.kind or (ns and k.namespaced and ens != ns):
                    continue
                now_m, old_m = match(obj), match(old)
                if typ == "MODIFIED":
                    if now_m and not old_m:
                        typ = "ADDED"
                    elif old_m and not now_m:
                        typ = "DELETED"
                    elif not now_m:
                        continue
                elif not now_m:
                    continue
                send(typ, obj)
            if not evs:
                last = max(last, cur_rv)
            now = time.monotonic()
            if now >= deadline:
                self._end_stream()
                return
            if bookmarks and now >= next_bm:
                next_bm = now + fk.bookmark_interval
                send("BOOKMARK", {"kind": k.kind, "apiVersion": k.api_version,
                                  "metadata": {"resourceVersion": str(last),
                                               "creationTimestamp": None}})

    def _log(self, ns, name):
        fk = self.server.fk
        store = fk.store
        pk = K.BY_KIND["Pod"]
        pod = store.get(pk, ns, name)
        c = fakekube_exec.pod_container(pod, name, _q1(self._q, "container"))
        cs = next((s for s in (pod.get("status") or {}).get("containerStatuses") or []
                   if s["name"] == c), None)
        if cs is None or "waiting" in (cs.get("state") or {}):
            why = ((cs or {}).get("state") or {}).get("waiting", {}).get("reason",
                                                                        "ContainerCreating")
            raise E.bad_request('container "%s" in pod "%s" is waiting to start: %s'
                                % (c, name, why))
        follow = _truthy(_q1(self._q, "follow", ""))
        key = (ns, name, c)
        if not follow:
            with store.cond:
                text = "".join(fk.logs.get(key, []))
            return self._send(200, text, "text/plain")
        self._start_stream("text/plain")
        pos = 0
        uid = pod["metadata"]["uid"]
        with store.cond:
            gen = store.cut_gen
        while True:
            with store.cond:
                while True:
                    lines = fk.logs.get(key, [])
                    cur = store.peek(pk, ns, name)
                    done = (cur is None or cur["metadata"]["uid"] != uid or "terminated" in
                            next((s.get("state") or {} for s in (cur.get("status") or {})
                                  .get("containerStatuses") or [] if s["name"] == c), {}))
                    if store.stopping or store.cut_gen != gen or len(lines) > pos or done:
                        break
                    store.cond.wait(1.0)
                new = lines[pos:]
                pos = len(lines)
                cut = store.stopping or store.cut_gen != gen
            for line in new:
                self._chunk(line.encode())
            if cut:
                self._cut()
                return
            if done:
                self._end_stream()
                return

    # ------------------------------------------------------------ control

    def _control(self, method):
        fk = self.server.fk
        parts = self._path.strip("/").split("/")[1:]
        body = {}
        if self._body:
            try:
                body = json.loads(self._body)
            except ValueError:
                raise E.bad_request("control body must be JSON")
        route = "/".join(parts)
        if route == "healthz":
            return self._send(200, {"ok": True})
        if route == "requests":
            if method == "GET":
                return self._send(200, fk.requests())
            if method == "DELETE":
                fk.clear_requests()
                return self._send(200, {"ok": True})
        if route == "faults":
            if method == "POST":
                return self._send(200, fk.add_fault(**body))
            if method == "GET":
                return self._send(200, fk.faults())
            if method == "DELETE":
                fk.clear_faults()
                return self._send(200, {"ok": True})
        if route == "cut-watches" and method == "POST":
            fk.cut_watches(bool(body.get("graceful", False)))
            return self._send(200, {"ok": True})
        if route == "compact" and method == "POST":
            return self._send(200, {"compacted": str(fk.compact())})
        if route == "tokens" and method == "POST":
            for t in body.get("add") or []:
                fk.add_token(t)
            for t in body.get("revoke") or []:
                fk.revoke_token(t)
            return self._send(200, {"ok": True})
        if route == "settings" and method == "POST":
            fk.settings(**body)
            return self._send(200, {"ok": True})
        if len(parts) == 4 and parts[0] == "pods" and method == "POST":
            ns, name, action = parts[1], parts[2], parts[3]
            if action == "terminate":
                pod = fk.terminate_pod(ns, name, body.get("container"),
                                       body.get("exitCode", 0), body.get("reason"),
                                       body.get("message"))
                return self._send(200, pod)
            if action == "log":
                fk.pod_log(ns, name, body.get("text", ""), body.get("container"))
                return self._send(200, {"ok": True})
            if action == "proxy-address":
                fk.set_proxy_address(ns, name, int(body["port"]), body.get("address"))
                return self._send(200, {"ok": True})
        raise E.ApiError(404, "NotFound", "no such fakekube control endpoint: %s %s"
                         % (method, self._path))


def _json_err(e):
    return str(e)


def _expired(rv, compacted):
    return E.status_body(410, "Expired", "too old resource version: %d (%d)"
                         % (rv, compacted))


def _too_large(rv, cur):
    return E.ApiError(504, "Timeout", "Timeout: Too large resource version: %d, current: %d"
                      % (rv, cur),
                      {"causes": [{"reason": "ResourceVersionTooLarge",
                                   "message": "Too large resource version"}],
                       "retryAfterSeconds": 1})


def make_ssl_context(pki_paths):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(pki_paths["server.crt"], pki_paths["server.key"])
    ctx.load_verify_locations(pki_paths["ca.crt"])
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
