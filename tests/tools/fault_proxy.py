#!/usr/bin/python3
"""An HTTP proxy for the remote-archive tests, on 127.0.0.1.

    fault_proxy.py PORT_FILE UPSTREAM MODE_FILE [PORT]

Listens on PORT, or a free loopback port (written to PORT_FILE once it
listens), and forwards every GET, HEAD, PUT, POST and DELETE to UPSTREAM
(http://127.0.0.1:PORT) with its query, its body (a chunked one sent on
with a Content-Length) and its headers but the hop-by-hop ones, doing
what MODE_FILE says, read at each request:

    pass          nothing
    flip          one byte of each body inverted
    truncate      half of each body sent, then the connection closed
    delay S       each response held S seconds first
    stall S       the headers and half of each body sent, then S seconds of
                  nothing before the rest (a server that dies meanwhile
                  leaves a read in flight)
    sigv4 SECRET  the request's AWS SigV4 signature checked with SECRET
                  (any method; the payload hash is x-amz-content-sha256,
                  UNSIGNED-PAYLOAD included, or without it the body's
                  SHA-256); 403 SignatureDoesNotMatch unless it holds, 400
                  XAmzContentSHA256Mismatch if the body has another hash
    drip N        the headers, then N bytes of the body a second (until the
                  client gives up)
    status C K    the first K requests in this mode passed, every later
                  one answered with HTTP status C (a 3xx pointing to /moved)

and, for uploads (PUT and POST; the other requests pass):

    upfail C N [MATCH]  the first N uploads in this mode (whose path and
                  query hold MATCH, when given) answered with HTTP
                  status C and an S3 error (503 SlowDown, 500
                  InternalError, ...), not forwarded; later ones pass
    upreset N [MATCH]  the first N uploads in this mode (as upfail) read,
                  not forwarded, and the connection reset without a
                  response
    uplost N [MATCH]  the first N uploads in this mode (as upfail)
                  forwarded (they take effect), then the connection reset
                  without the response
    upslow S      each upload held S seconds before it is forwarded
    upcount       nothing (every request is logged with its method and
                  path, whatever the mode)
    delfail       a DeleteObjects (POST ?delete) not forwarded, answered
                  200 with an AccessDenied <Error> for its first key, as
                  S3 reports a key it could not delete

Whatever the mode, a request whose Content-MD5 is not its body's is
answered 400 BadDigest, as S3 does, and "If-None-Match: *" on a PUT of a whole object or on a
CompleteMultipartUpload (POST ...?uploadId=) is honoured, which s3rver
does not do: under one lock for all such requests the key is looked up
upstream (HEAD); if it exists the answer is 412 PreconditionFailed and
nothing is forwarded, otherwise the request is forwarded before the lock
is let go, so two racing creates of one key cannot both succeed.

s3rver neither lists nor aborts multipart uploads (501, 405): the
proxy keeps the uploads under way as it sees them begin (POST ?uploads
answered 200) and end (a completion answered 200, an abort), answers
ListMultipartUploads (GET /BUCKET?uploads, one upload a page, so that
a listing of two pages) and AbortMultipartUpload (DELETE ...?uploadId=, 204,
404 NoSuchUpload for an upload it does not know) itself, and writes
them to MODE_FILE.uploads after each change, a line each: the key, a
space, the upload id. The parts of an aborted upload stay in s3rver.

Appends one line per request to MODE_FILE.log: the mode, the Range header
("-" without), the method and the path with its query, e.g.
"pass - PUT /test-bucket/k?partNumber=1&uploadId=x". Runs until killed.
"""
import base64
import hashlib
import hmac
import re
import http.client
import os
import http.server
import socket
import struct
import sys
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

port_file, upstream, mode_file = sys.argv[1:4]
up = urllib.parse.urlsplit(upstream)

# Not forwarded (RFC 9110 7.6.1), nor Expect: the proxy answers the
# 100-continue itself and sends upstream the whole body at once.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
              "trailer", "trailers", "transfer-encoding", "upgrade", "expect", "proxy-connection"}
S3_CODES = {400: "BadRequest", 403: "AccessDenied", 404: "NoSuchKey", 409: "OperationAborted",
            412: "PreconditionFailed", 500: "InternalError", 501: "NotImplemented",
            503: "SlowDown", 504: "GatewayTimeout"}


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def uri_encode(s):
    """SigV4's UriEncode of one name, value or path segment (given
    percent-encoded): every byte but A-Z a-z 0-9 - _ . ~ as %XY."""
    return urllib.parse.quote(urllib.parse.unquote_to_bytes(s), safe="-_.~")


def canonical_query(query):
    """Each name and value URI-encoded, "name=" for a bare name, the pairs
    sorted by name, then value."""
    pairs = sorted((uri_encode(n), uri_encode(v))
                   for n, _, v in (p.partition("=") for p in query.split("&") if p))
    return "&".join(f"{n}={v}" for n, v in pairs)


def sigv4_holds(handler, secret, body):
    auth = handler.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False
    try:
        fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
        _key_id, date, region, service, _ = fields["Credential"].split("/")
        signed = fields["SignedHeaders"].split(";")
        signature = fields["Signature"]
    except (KeyError, ValueError):
        return False
    path, _, query = handler.path.partition("?")
    canon_path = "/".join(uri_encode(seg) for seg in path.split("/")) or "/"
    headers = "".join(f"{h}:{','.join(' '.join(v.split()) for v in handler.headers.get_all(h, ['']))}\n"
                      for h in signed)
    payload = handler.headers.get("x-amz-content-sha256") or sha256(body or b"")
    canonical = "\n".join([handler.command, canon_path, canonical_query(query), headers,
                           ";".join(signed), payload])
    amz_date = handler.headers.get("x-amz-date", "")
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, sha256(canonical.encode())])
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    want = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, signature) and "x-amz-date" in signed and "host" in signed


seen = {}  # requests (uploads for the up* modes) per mode line
seen_lock = threading.Lock()
create_lock = threading.Lock()  # conditional creates, one at a time


def count(mode):
    with seen_lock:
        seen[mode] = seen.get(mode, 0) + 1
        return seen[mode]


def read_mode():
    # "echo MODE > FILE" empties the file before it writes: read again
    for _ in range(50):
        with open(mode_file) as f:
            mode = f.read().split()
        if mode:
            return mode
        time.sleep(0.01)
    return ["pass"]


uploads = set()  # (bucket, key, upload id) under way
uploads_lock = threading.Lock()
UPLOADS_PAGE = 1


def uploads_changed():
    """Writes the uploads under way to MODE_FILE.uploads (uploads_lock
    held)."""
    with open(mode_file + ".uploads.tmp", "w") as f:
        f.writelines(f"{k} {i}\n" for _, k, i in sorted(uploads))
    os.rename(mode_file + ".uploads.tmp", mode_file + ".uploads")


def bucket_key(path):
    """(bucket, key) of a request's path, the key decoded ("" for none)."""
    bucket, _, key = path.partition("?")[0].lstrip("/").partition("/")
    return urllib.parse.unquote(bucket), urllib.parse.unquote(key)


def list_uploads(bucket, query):
    """The ListMultipartUploads answer: the uploads of bucket under the
    prefix, after the markers, UPLOADS_PAGE of them."""
    q = urllib.parse.parse_qs(query, keep_blank_values=True)
    prefix = q.get("prefix", [""])[0]
    key_marker = q.get("key-marker", [""])[0]
    id_marker = q.get("upload-id-marker", [""])[0]
    with uploads_lock:
        mine = sorted((k, i) for b, k, i in uploads if b == bucket and k.startswith(prefix))
    if key_marker:
        mine = [(k, i) for k, i in mine if k > key_marker or (id_marker and k == key_marker and i > id_marker)]
    page, more = mine[:UPLOADS_PAGE], len(mine) > UPLOADS_PAGE
    xml = ('<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult '
           'xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
           f"<Bucket>{escape(bucket)}</Bucket><KeyMarker>{escape(key_marker)}</KeyMarker>"
           f"<UploadIdMarker>{escape(id_marker)}</UploadIdMarker><Prefix>{escape(prefix)}</Prefix>"
           f"<MaxUploads>{UPLOADS_PAGE}</MaxUploads><IsTruncated>{'true' if more else 'false'}</IsTruncated>")
    if more:
        xml += (f"<NextKeyMarker>{escape(page[-1][0])}</NextKeyMarker>"
                f"<NextUploadIdMarker>{escape(page[-1][1])}</NextUploadIdMarker>")
    for k, i in page:
        xml += (f"<Upload><Key>{escape(k)}</Key><UploadId>{escape(i)}</UploadId>"
                "<Initiated>2026-01-01T00:00:00.000Z</Initiated><StorageClass>STANDARD</StorageClass></Upload>")
    return (xml + "</ListMultipartUploadsResult>").encode()


def s3_error(code, message, resource):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message><Resource>{resource}</Resource>"
            "<RequestId>fault-proxy</RequestId></Error>").encode()


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def read_body(self):
        """The request's body: None without one, False when the client
        went away (or stalled a minute) before all of it came."""
        length = self.headers.get("Content-Length")
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        if length is None and not chunked:
            return None
        self.connection.settimeout(60)
        try:
            if not chunked:
                body = self.rfile.read(int(length))
                return body if len(body) == int(length) else False
            body = b""
            while True:
                line = self.rfile.readline(65537)
                if not line.endswith(b"\n"):
                    return False
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    break
                chunk = self.rfile.read(size + 2)
                if len(chunk) != size + 2:
                    return False
                body += chunk[:size]
            while True:  # trailers, up to the empty line
                line = self.rfile.readline(65537)
                if not line.endswith(b"\n"):
                    return False
                if not line.strip():
                    return body
        except (OSError, ValueError):
            return False
        finally:
            try:
                self.connection.settimeout(None)
            except OSError:
                pass

    def reset(self):
        """The connection closed with a reset, no response sent."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()
            self.connection.close()
        except OSError:
            pass

    def answer(self, status, body, content_type="application/xml"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def conditional_create(self):
        if self.headers.get("If-None-Match", "").strip() != "*":
            return False
        query = urllib.parse.parse_qs(self.path.partition("?")[2], keep_blank_values=True)
        if self.command == "PUT":
            return "uploadId" not in query and "partNumber" not in query
        return self.command == "POST" and "uploadId" in query

    def upstream(self, method, path, headers, body):
        """(status, headers, body) of the request sent upstream."""
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()

    def forward(self, body):
        drop = HOP_BY_HOP | {t.strip().lower() for t in self.headers.get("Connection", "").split(",")}
        headers = {k: v for k, v in self.headers.items() if k.lower() not in drop}
        if body is not None:
            headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
            headers["Content-Length"] = str(len(body))
        if not self.conditional_create():
            return self.upstream(self.command, self.path, headers, body)
        key = self.path.partition("?")[0]
        with create_lock:
            status, _, _ = self.upstream("HEAD", key, {"Host": self.headers.get("Host", up.netloc)}, None)
            if status == 200:
                return 412, [("Content-Type", "application/xml")], s3_error(
                    "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", key)
            if status != 404:
                return 500, [("Content-Type", "application/xml")], s3_error(
                    "InternalError", f"the proxy's HEAD of the key got HTTP {status}", key)
            return self.upstream(self.command, self.path, headers, body)

    def uploads_request(self):
        """Answers a listing or an abort of multipart uploads: whether
        this request was one."""
        bucket, key = bucket_key(self.path)
        query = self.path.partition("?")[2]
        q = urllib.parse.parse_qs(query, keep_blank_values=True)
        if self.command == "GET" and not key and "uploads" in q:
            self.answer(200, list_uploads(bucket, query))
            return True
        if self.command == "DELETE" and key and "uploadId" in q:
            with uploads_lock:
                upload = (bucket, key, q["uploadId"][0])
                known = upload in uploads
                uploads.discard(upload)
                uploads_changed()
            if known:
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self.answer(404, s3_error("NoSuchUpload", "no such upload", self.path.partition("?")[0]))
            return True
        return False

    def track_upload(self, status, body):
        """Keeps the upload that the forwarded request began or ended."""
        bucket, key = bucket_key(self.path)
        q = urllib.parse.parse_qs(self.path.partition("?")[2], keep_blank_values=True)
        if self.command != "POST" or status != 200 or not key:
            return
        with uploads_lock:
            if "uploads" in q:
                found = re.search(rb"<UploadId>([^<]*)</UploadId>", body or b"")
                if found:
                    uploads.add((bucket, key, found.group(1).decode()))
            elif "uploadId" in q:
                uploads.discard((bucket, key, q["uploadId"][0]))
            else:
                return
            uploads_changed()

    def do_request(self):
        mode = read_mode()
        with open(mode_file + ".log", "a") as log:
            log.write(f"{' '.join(mode)} {self.headers.get('Range', '-')} {self.command} {self.path}\n")
        body = self.read_body()
        if body is False:
            self.close_connection = True
            return
        upload = self.command in ("PUT", "POST")
        resource = self.path.partition("?")[0]
        if mode[0] == "sigv4" and not sigv4_holds(self, mode[1], body):
            self.answer(403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>")
            return
        claimed = self.headers.get("x-amz-content-sha256", "")
        if mode[0] == "sigv4" and len(claimed) == 64 and claimed != sha256(body or b""):
            self.answer(400, s3_error("XAmzContentSHA256Mismatch", "the body's SHA-256 is not the one signed", resource))
            return
        md5 = self.headers.get("Content-MD5")
        if md5 is not None and md5 != base64.b64encode(hashlib.md5(body or b"").digest()).decode():
            self.answer(400, s3_error("BadDigest", "the Content-MD5 is not the body's", resource))
            return
        if mode[0] == "status" and count(" ".join(mode)) > int(mode[2]):
            self.send_response(int(mode[1]))
            if mode[1].startswith("3"):
                self.send_header("Location", "/moved")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.uploads_request():
            return
        if mode[0] == "delfail" and self.command == "POST" and "?delete" in self.path:
            key = re.search(rb"<Key>([^<]*)</Key>", body or b"")
            self.answer(200, b"<DeleteResult><Error><Key>" + (key.group(1) if key else b"") +
                        b"</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error></DeleteResult>")
            return
        fault = None
        if upload and mode[0] in ("upfail", "upreset", "uplost"):
            n_at = 2 if mode[0] == "upfail" else 1
            match = mode[n_at + 1] if len(mode) > n_at + 1 else ""
            if match in self.path and count(" ".join(mode)) <= int(mode[n_at]):
                fault = mode[0]
        if fault == "upfail":
            code = int(mode[1])
            name = S3_CODES.get(code) or http.HTTPStatus(code).phrase.replace(" ", "")
            self.answer(code, s3_error(name, "injected by the test proxy", resource))
            return
        if fault == "upreset":
            self.reset()
            return
        if mode[0] == "delay" or (mode[0] == "upslow" and upload):
            time.sleep(float(mode[1]))
        status, headers, body = self.forward(body)
        self.track_upload(status, body)
        if fault == "uplost":
            self.reset()
            return
        if mode[0] == "flip" and body:
            body = body[: len(body) // 2] + bytes([body[len(body) // 2] ^ 0xFF]) + body[len(body) // 2 + 1:]
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in ("connection", "transfer-encoding", "keep-alive"):
                self.send_header(k, v)
        if (self.command != "HEAD" and status not in (204, 304) and status >= 200
                and not any(k.lower() == "content-length" for k, _ in headers)):
            self.send_header("Content-Length", str(len(body)))  # it came chunked
        self.end_headers()
        if self.command == "HEAD":
            return
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

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_request


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that gave up (timeout) while we sent: expected


Server.allow_reuse_address = True  # restarted on its port at once
server = Server(("127.0.0.1", int(sys.argv[4]) if len(sys.argv) > 4 else 0), Proxy)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
