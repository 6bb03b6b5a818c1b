#!/usr/bin/python3
"""The fake upstreams of the local cluster, run in a container on the test's egress network
(only the mitm reaches it): api.anthropic.com (the Messages API, streamed SSE or not) and
the OAuth token endpoint, over TLS with a certificate of the test CA.

    fake_upstream.py --cert PEM --key PEM --state DIR --answer TEXT [--port 443]

Every request is appended to DIR/requests.jsonl (method, host, path, the Authorization and
x-api-key headers; for the token endpoint its body too, the refresh grant). Other /api/ paths
get 404, as a stand-in may. The token endpoint grants --renewed-token-N, N counting the
grants, for --expires-in seconds. Prints "fake upstream listening on PORT" once ready."""

import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler

import fake_tls

MAX_BODY = 8 << 20


def sse(events):
    return b"".join(b"event: %s\ndata: %s\n\n" % (t.encode(), json.dumps(d).encode())
                    for t, d in events)


def message(answer, model):
    return {"id": "msg_fake_upstream", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": answer}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}


def stream(answer, model):
    start = dict(message("", model), content=[], stop_reason=None)
    return sse([
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": answer}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                              "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _record(self, body):
        rec = {"method": self.command, "host": self.headers.get("Host", ""),
               "path": self.path, "authorization": self.headers.get("Authorization"),
               "x-api-key": self.headers.get("x-api-key")}
        if self.path.split("?", 1)[0] == "/v1/oauth/token":
            rec["body"] = (body or b"").decode("utf-8", "replace")
        with self.server.lock, open(self.server.log, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def _send(self, code, body, ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        n = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
        return self.rfile.read(n) if n else b""

    def do_GET(self):  # noqa: N802
        self._body()
        self._record(None)
        # Claude Code's start-up connectivity check: GET /api/hello on the API and
        # /v1/oauth/hello on the token URL's origin must answer 200, or an interactive
        # agent says it cannot reach Anthropic and quits.
        if self.path.split("?", 1)[0] in ("/api/hello", "/v1/oauth/hello"):
            self._send(200, b'{"message":"hello"}')
            return
        self._send(404, b'{"type":"error","error":{"type":"not_found_error"}}')

    def do_POST(self):  # noqa: N802
        raw = self._body()
        self._record(raw)
        path = self.path.split("?", 1)[0]
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            req = {}
        if path == "/v1/messages":
            model = req.get("model", "claude-fake")
            if req.get("stream"):
                body = stream(self.server.answer, model)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self._send(200, json.dumps(message(self.server.answer, model)).encode())
        elif path == "/v1/oauth/token":
            with self.server.lock:
                self.server.grants += 1
                n = self.server.grants
            token = "%s-%d" % (self.server.renewed, n)
            self._send(200, json.dumps({"access_token": token, "refresh_token": token + "-r",
                                        "expires_in": self.server.expires_in,
                                        "token_type": "Bearer"}).encode())
        else:
            self._send(404, b'{"type":"error","error":{"type":"not_found_error"}}')

    def log_message(self, *a):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--answer", required=True)
    ap.add_argument("--renewed-token", default="sk-ant-oat01-renewed-by-fake-upstream")
    ap.add_argument("--expires-in", type=int, default=28800)
    ap.add_argument("--port", type=int, default=443)
    a = ap.parse_args()
    srv = fake_tls.Server(("0.0.0.0", a.port), Handler, a.cert, a.key)
    srv.lock = threading.Lock()
    srv.log = os.path.join(a.state, "requests.jsonl")
    srv.answer, srv.renewed, srv.expires_in, srv.grants = (a.answer, a.renewed_token,
                                                            a.expires_in, 0)
    print("fake upstream listening on %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
