#!/usr/bin/python3
"""A fake of OpenAI for the local cluster, enough for `codex exec` and OpenAI providers:
the Responses API streamed (POST .../responses with "stream": true, as api.openai.com/v1
and chatgpt.com/backend-api/codex serve it), the model list, and the OAuth token endpoint
(POST /oauth/token, as auth.openai.com serves it). Over TLS with a certificate of the test
CA, or plain HTTP with --plain (tests on the host).

    fake_openai.py --state DIR --answer TEXT [--cert PEM --key PEM | --plain] [--port 443]

Every request is appended to DIR/requests.jsonl (method, host, path, the Authorization and
ChatGPT-Account-Id headers, and for the token endpoint the grant and refresh token it got).
What nothing here serves gets a 404 JSON error. Prints "fake openai listening on PORT" once
ready (the port it bound: --port 0 picks one)."""

import argparse
import base64
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler

import fake_tls

MAX_BODY = 8 << 20


def sse(events):
    return b"".join(b"event: %s\ndata: %s\n\n" % (d["type"].encode(), json.dumps(d).encode())
                    for d in events)


def response_obj(rid, model, status, output):
    return {"id": rid, "object": "response", "created_at": int(time.time()), "status": status,
            "model": model, "output": output,
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 15}}


def stream(answer, model, seq):
    rid, mid = "resp_fake_openai_%d" % seq, "msg_fake_openai_%d" % seq
    text = {"type": "output_text", "text": answer, "annotations": []}
    item = {"type": "message", "id": mid, "status": "completed", "role": "assistant",
            "content": [text]}
    return sse([
        {"type": "response.created", "response": response_obj(rid, model, "in_progress", [])},
        {"type": "response.output_item.added", "output_index": 0,
         "item": dict(item, status="in_progress", content=[])},
        {"type": "response.content_part.added", "item_id": mid, "output_index": 0,
         "content_index": 0, "part": dict(text, text="")},
        {"type": "response.output_text.delta", "item_id": mid, "output_index": 0,
         "content_index": 0, "delta": answer},
        {"type": "response.output_text.done", "item_id": mid, "output_index": 0,
         "content_index": 0, "text": answer},
        {"type": "response.content_part.done", "item_id": mid, "output_index": 0,
         "content_index": 0, "part": text},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response_obj(rid, model, "completed",
                                                                  [item])},
    ])


def jwt(claims):
    """An unsigned JWT: what codex parses (it decodes the payload, it checks no signature)."""
    def part(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return "%s.%s.%s" % (part({"alg": "none", "typ": "JWT"}), part(claims), "fake-openai")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _record(self, extra=None):
        rec = {"method": self.command, "host": self.headers.get("Host", ""),
               "path": self.path, "authorization": self.headers.get("Authorization"),
               "chatgpt-account-id": self.headers.get("ChatGPT-Account-Id"),
               "upgrade": self.headers.get("Upgrade"), **(extra or {})}
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

    def _json(self, raw):
        """The request's JSON; codex compresses its requests to the ChatGPT backend (zstd)."""
        if self.headers.get("Content-Encoding", "").lower() == "zstd":
            try:
                import zstandard  # mitmproxy's own dependency, in the fake's image
            except ImportError:
                return {"stream": True}
            try:
                raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=MAX_BODY)
            except zstandard.ZstdError:
                return {}
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            return {}
        return req if isinstance(req, dict) else {}

    def _not_found(self):
        self._send(404, b'{"error":{"message":"not served by fake_openai","type":'
                        b'"invalid_request_error","code":"not_found"}}')

    def do_GET(self):  # noqa: N802
        self._body()
        self._record()
        path = self.path.split("?", 1)[0]
        if path.endswith("/wham/accounts/check"):
            self._send(200, json.dumps(self._accounts()).encode())
            return
        if path.endswith("/models") and not self.headers.get("Upgrade"):
            # the list codex may fetch; an empty one makes it use its built-in models
            self._send(200, b'{"object":"list","data":[],"models":[]}')
            return
        self._not_found()

    def _accounts(self):
        """The ChatGPT backend's account list, which codex reads to route its requests."""
        acct = self.server.account
        origin = "https://" + self.headers.get("Host", "chatgpt.com")
        entry = {"account_id": acct, "id": acct, "plan_type": "pro", "structure": "personal",
                 "is_deactivated": False, "can_access_with_session": True,
                 "is_fedramp_compliant_workspace": False, "workspace_backend_origin": origin,
                 "account_routing_override": "NO_CONSTRAINT", "sso_connection_name": None,
                 "profile_picture_url": None}
        return {"accounts": [entry], "account_ordering": [acct],
                "default_account_id": acct}

    def _token(self, raw):
        req = self._json(raw)
        self._record({"grant_type": req.get("grant_type"),
                      "refresh_token": req.get("refresh_token"),
                      "client_id": req.get("client_id")})
        now = int(time.time())
        claims = {"exp": now + self.server.expires_in, "iat": now,
                  "https://api.openai.com/auth": {"chatgpt_account_id": self.server.account,
                                                  "chatgpt_plan_type": "pro"}}
        access = jwt(dict(claims, renewed=self.server.renewed))
        ident = jwt(dict(claims, email="user@example.com"))
        self._send(200, json.dumps({"access_token": access, "id_token": ident,
                                    "refresh_token": self.server.renewed + "-refresh",
                                    "expires_in": self.server.expires_in,
                                    "token_type": "Bearer"}).encode())

    def do_POST(self):  # noqa: N802
        raw = self._body()
        path = self.path.split("?", 1)[0]
        if path == "/oauth/token":
            self._token(raw)
            return
        self._record()
        req = self._json(raw)
        if not path.endswith("/responses"):
            self._not_found()
            return
        with self.server.lock:
            self.server.seq += 1
            seq = self.server.seq
        body = stream(self.server.answer, req.get("model", "gpt-fake"), seq)
        if not req.get("stream"):
            self._send(400, b'{"error":{"message":"fake_openai streams only"}}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--plain", action="store_true")
    ap.add_argument("--state", required=True)
    ap.add_argument("--answer", required=True)
    ap.add_argument("--renewed-token", default="renewed-by-fake-openai")
    ap.add_argument("--account-id", default="acct-fake-openai")
    ap.add_argument("--expires-in", type=int, default=28800)
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=443)
    a = ap.parse_args()
    if not a.plain and not (a.cert and a.key):
        ap.error("--cert and --key, or --plain")
    srv = fake_tls.Server((a.host, a.port), Handler, None if a.plain else a.cert, a.key)
    srv.lock = threading.Lock()
    srv.log = os.path.join(a.state, "requests.jsonl")
    srv.answer, srv.renewed, srv.account = a.answer, a.renewed_token, a.account_id
    srv.expires_in, srv.seq = a.expires_in, 0
    print("fake openai listening on %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
