#!/usr/bin/python3
"""An HTTP proxy for the remote-archive tests, on 127.0.0.1.

    fault_proxy.py PORT_FILE UPSTREAM MODE_FILE [PORT]

Listens on PORT, or a free loopback port (written to PORT_FILE once it
listens), and
forwards every GET to UPSTREAM (http://127.0.0.1:PORT), doing to the
response what MODE_FILE says, read at each request:

    pass          nothing
    flip          one byte of each body inverted
    truncate      half of each body sent, then the connection closed
    delay S       each response held S seconds first
    stall S       the headers and half of each body sent, then S seconds of
                  nothing before the rest (a server that dies meanwhile
                  leaves a read in flight)
    sigv4 SECRET  the request's AWS SigV4 signature checked with SECRET;
                  403 SignatureDoesNotMatch unless it holds
    drip N        the headers, then N bytes of the body a second (until the
                  client gives up)
    status C K    the first K requests in this mode passed, every later
                  one answered with HTTP status C (a 3xx pointing to /moved)

and appends one line per request to MODE_FILE.log. Runs until killed.
"""
import hashlib
import hmac
import http.client
import os
import http.server
import sys
import threading
import time
import urllib.parse

port_file, upstream, mode_file = sys.argv[1:4]
up = urllib.parse.urlsplit(upstream)


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def sigv4_holds(handler, secret):
    auth = handler.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False
    fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    _key_id, date, region, service, _ = fields["Credential"].split("/")
    signed = fields["SignedHeaders"].split(";")
    path, _, query = handler.path.partition("?")
    canon_query = "&".join(sorted(query.split("&"))) if query else ""
    headers = "".join(f"{h}:{' '.join(handler.headers.get(h, '').split())}\n" for h in signed)
    payload = handler.headers.get("x-amz-content-sha256", sha256(b""))
    canonical = "\n".join([handler.command, path, canon_query, headers, ";".join(signed), payload])
    amz_date = handler.headers.get("x-amz-date", "")
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, sha256(canonical.encode())])
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    want = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, fields["Signature"]) and "x-amz-date" in signed and "host" in signed


seen = {}  # requests per mode, for "status"
seen_lock = threading.Lock()


def count(mode):
    with seen_lock:
        seen[mode] = seen.get(mode, 0) + 1
        return seen[mode]


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with open(mode_file) as f:
            mode = f.read().split()
        with open(mode_file + ".log", "a") as log:
            log.write(f"{' '.join(mode)} {self.headers.get('Range', '-')}\n")
        if mode[0] == "sigv4" and not sigv4_holds(self, mode[1]):
            body = b"<Error><Code>SignatureDoesNotMatch</Code></Error>"
            self.send_response(403)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if mode[0] == "status" and count(" ".join(mode)) > int(mode[2]):
            self.send_response(int(mode[1]))
            if mode[1].startswith("3"):
                self.send_header("Location", "/moved")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode[0] == "delay":
            time.sleep(float(mode[1]))
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
        conn.request("GET", self.path, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        if mode[0] == "flip" and body:
            body = body[: len(body) // 2] + bytes([body[len(body) // 2] ^ 0xFF]) + body[len(body) // 2 + 1:]
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "keep-alive"):
                self.send_header(k, v)
        self.end_headers()
        if mode[0] == "stall":
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            time.sleep(float(mode[1]))
            self.wfile.write(body[len(body) // 2:])
            return
        if mode[0] == "drip":
            n = int(mode[1])
            for i in range(0, len(body), n):
                self.wfile.write(body[i:i + n])
                self.wfile.flush()
                time.sleep(1)
            return
        if mode[0] == "truncate":
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that gave up (timeout) while we sent: expected


Server.allow_reuse_address = True  # restarted on its port at once
server = Server(("127.0.0.1", int(sys.argv[4]) if len(sys.argv) > 4 else 0), Proxy)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
