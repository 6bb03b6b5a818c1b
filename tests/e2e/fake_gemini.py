#!/usr/bin/python3
"""A fake of the Google APIs the Gemini CLI calls, for the local cluster (localcluster.py runs
it in a container on the egress network, only the mitm reaches it) and for the host's token
refresh (run on loopback without TLS). It answers only what the CLI needs to answer a prompt:

- generativelanguage.googleapis.com (--api-key): models/M:generateContent,
  :streamGenerateContent (SSE with ?alt=sse), :countTokens;
- cloudcode-pa.googleapis.com (--google, Code Assist v1internal): loadCodeAssist (an account
  already on the free tier with a project, so the CLI skips onboarding), onboardUser (done),
  generateContent, streamGenerateContent, countTokens, and {} for the rest (experiments,
  quota, admin controls, metrics); a request for JSON output (the CLI's model router) gets
  JSON it accepts, any other the answer;
- oauth2.googleapis.com: POST /tokeninfo (the CLI checks its cached token at start-up) and
  POST /token (a refresh grant: a new access token of --renewed-token, numbered);
- www.googleapis.com: GET /oauth2/v2/userinfo; play.googleapis.com: POST /log.

    fake_gemini.py [--cert PEM --key PEM] --state DIR [--answer TEXT] [--port 443]

Every request is appended to DIR/requests.jsonl (method, host, path, the Authorization and
x-goog-api-key headers, and for /token the grant's refresh_token). Unknown paths get
Google's 404 JSON. Prints "fake gemini listening on PORT" once ready."""

import argparse
import json
import os
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler

import fake_tls

MAX_BODY = 8 << 20
SCOPE = ("https://www.googleapis.com/auth/cloud-platform "
         "https://www.googleapis.com/auth/userinfo.email "
         "https://www.googleapis.com/auth/userinfo.profile")
NOT_FOUND = {"error": {"code": 404, "message": "not found (fake gemini)", "status": "NOT_FOUND"}}


# What a request for JSON gets (the CLI's model router and next-speaker check ask for it):
# the keys those read, each with a value they accept.
JSON_ANSWER = json.dumps({"reasoning": "fake", "model_choice": "flash", "next_speaker": "user"})


def wants_json(req):
    """A generate request asking for JSON output (Code Assist wraps it in "request")."""
    inner = req.get("request", req) if isinstance(req, dict) else {}
    cfg = inner.get("generationConfig") or inner.get("generation_config") or {}
    return isinstance(cfg, dict) and cfg.get("responseMimeType") == "application/json"


def candidate(answer):
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": answer}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                              "totalTokenCount": 15},
            "modelVersion": "gemini-fake"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _record(self, body):
        rec = {"method": self.command, "host": self.headers.get("Host", ""), "path": self.path,
               "authorization": self.headers.get("Authorization"),
               "x-goog-api-key": self.headers.get("x-goog-api-key")}
        if self.path.split("?", 1)[0] == "/token":
            form = urllib.parse.parse_qs(body.decode(errors="replace"))
            rec["refresh_token"] = (form.get("refresh_token") or [None])[0]
            rec["client_id"] = (form.get("client_id") or [None])[0]
        with self.server.lock, open(self.server.log, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def _send(self, code, doc, ctype="application/json"):
        body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        n = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
        return self.rfile.read(n) if n else b""

    def _generate(self, method, wrap):
        """A model's answer: `wrap` puts it in Code Assist's {"response": ...} envelope."""
        answer = candidate(JSON_ANSWER if wants_json(self.req) else self.server.answer)
        doc = {"response": answer, "traceId": "fake-trace"} if wrap else answer
        if method == "streamGenerateContent":
            self._send(200, b"data: " + json.dumps(doc).encode() + b"\r\n\r\n",
                       "text/event-stream")
        elif method == "generateContent":
            self._send(200, doc)
        else:
            self._send(200, {"totalTokens": 10})

    def _code_assist(self, method):
        if method == "loadCodeAssist":
            tier = {"id": "free-tier", "name": "Gemini Code Assist for individuals",
                    "userDefinedCloudaicompanionProject": False}
            self._send(200, {"currentTier": tier, "allowedTiers": [dict(tier, isDefault=True)],
                             "cloudaicompanionProject": "uplink-fake-project"})
        elif method == "onboardUser":
            self._send(200, {"done": True, "response": {
                "cloudaicompanionProject": {"id": "uplink-fake-project"}}})
        elif method in ("generateContent", "streamGenerateContent", "countTokens"):
            self._generate(method, True)
        else:
            self._send(200, {})

    def _token(self):
        with self.server.lock:
            self.server.grants += 1
            n = self.server.grants
        self._send(200, {"access_token": "%s-%d" % (self.server.renewed, n), "expires_in": 200,
                         "scope": SCOPE, "token_type": "Bearer"})

    def _route(self):
        host = self.headers.get("Host", "").split(":", 1)[0]
        path = self.path.split("?", 1)[0]
        method = path.rsplit(":", 1)[1] if ":" in path else ""
        if host == "cloudcode-pa.googleapis.com" and path.startswith("/v1internal"):
            return self._code_assist(method)
        if host == "generativelanguage.googleapis.com" and "/models/" in path and method:
            return self._generate(method, False)
        if path == "/tokeninfo":
            return self._send(200, {"azp": "fake", "aud": "fake", "scope": SCOPE,
                                    "expires_in": 3599, "access_type": "offline"})
        if path == "/token":
            return self._token()
        if path == "/oauth2/v2/userinfo":
            return self._send(200, {"id": "1", "email": "uplink-user@example.com"})
        if path == "/log":
            return self._send(200, {})
        self._send(404, NOT_FOUND)

    def do_GET(self):  # noqa: N802
        self._record(self._body())
        self.req = {}
        self._route()

    def do_POST(self):  # noqa: N802
        raw = self._body()
        self._record(raw)
        try:
            self.req = json.loads(raw or b"{}")
        except ValueError:
            self.req = {}
        self._route()

    def log_message(self, *a):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--state", required=True)
    ap.add_argument("--answer", default="The fake Gemini says: green-lantern-7")
    ap.add_argument("--renewed-token", default="ya29.renewed-by-fake-gemini")
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=443)
    a = ap.parse_args()
    srv = fake_tls.Server((a.host, a.port), Handler, a.cert, a.key)
    srv.lock = threading.Lock()
    srv.log = os.path.join(a.state, "requests.jsonl")
    srv.answer, srv.renewed, srv.grants = a.answer, a.renewed_token, 0
    print("fake gemini listening on %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
