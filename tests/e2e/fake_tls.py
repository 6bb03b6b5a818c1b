"""The HTTP server the local cluster's fakes run (fake_upstream.py, fake_openai.py,
fake_gemini.py): threaded, and over TLS when given a certificate.

The TLS handshake runs in the connection's own thread, bounded by HANDSHAKE_SECONDS. Wrapping
the listening socket instead would run every handshake in the accepting thread with no
bound, so one peer that connects and never finishes its hello would stall every later
connection, and the mitm would answer each of them 502."""

import socket
import ssl
from http.server import ThreadingHTTPServer

HANDSHAKE_SECONDS = 30


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, addr, handler, cert=None, key=None):
        super().__init__(addr, handler)
        self.tls = None
        if cert:
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(cert, key)

    def finish_request(self, request, client_address):
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_SECONDS)
        try:
            conn = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return    # wrap_socket has closed it
        conn.settimeout(None)
        try:
            self.RequestHandlerClass(conn, client_address, self)
        except (ConnectionError, ssl.SSLError, socket.timeout):
            pass
        finally:
            conn.close()
