"""`tokenmill serve` against memory-exhaustion and framing attacks, over raw sockets.

    python3 tests/serve/http_attacks_test.py BUILD/tokenmill tests/fixtures [unittest args]

One server on tests/fixtures/hf/smollm_chat with an API key and --max-body 1 MiB. Each
attack is sent to /tokenize (which needs no key) or /v1/completions; for each the test checks
the status, that the answer comes at once (not after a read timeout), how much the server's
peak resident memory grew (VmHWM, reset before the attack), and that the server still
serves afterwards:
  - a 20 MB chunked body: 413, bounded by the body limit, not the body;
  - a gzip body that inflates 64 KB into 64 MB: 415 (bodies are taken uncompressed);
  - 1,000,000 header fields (a 14 MB head): 431;
  - Content-Length with Transfer-Encoding (request smuggling): 400, and the request hidden
    behind it is not served;
  - a negative, a non-numeric and an astronomically large Content-Length: 400 / 413 at once;
  - HTTP/1.0 clients get length-delimited answers, never chunked ones (streamed answers end
    with the connection), and a valid chunked request is served as its Content-Length twin.
"""

import gzip
import json
import pathlib
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_process import main, serve  # noqa: E402

API_KEY = "sk-attacks-test-51c9"
MAX_BODY = 1 << 20
READ_TIMEOUT = 10  # the server's; every answer below must come well before it
# Peak memory an attack may add: a few copies of a body at the limit, far below what reading
# the attacks whole would take (20 MB, 64 MB, about 100 MB of parsed header fields).
MEMORY_BOUND = 16 << 20

server = None
_server_context = None


def setUpModule():
    global server, _server_context
    binary, fixtures = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    _server_context = serve(binary, fixtures / "hf" / "smollm_chat", "--max-body", MAX_BODY,
                            "--read-timeout", READ_TIMEOUT, threads=2, api_key=API_KEY)
    server = _server_context.__enter__()


def tearDownModule():
    _server_context.__exit__(None, None, None)


class Response:
    def __init__(self, raw, seconds):
        self.raw = raw
        self.seconds = seconds
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status_line = lines[0]
        self.status = int(lines[0].split()[1]) if len(lines[0].split()) > 1 else None
        self.headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def json(self):
        return json.loads(self.body)


def exchange(data, timeout=30):
    """Sends `data` on a fresh connection (from another thread, so that a server that answers
    before reading everything is heard) and reads until the server closes the connection."""
    s = socket.create_connection(server.host_port())
    s.settimeout(timeout)

    def send():
        try:
            s.sendall(data)
        except OSError:
            pass  # the server stopped reading: its answer is what counts

    sender = threading.Thread(target=send, daemon=True)
    start = time.monotonic()
    sender.start()
    chunks = []
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    seconds = time.monotonic() - start
    s.close()
    sender.join(timeout=5)
    return Response(b"".join(chunks), seconds)


def request_bytes(method, path, headers, body=b"", version="HTTP/1.1"):
    lines = [f"{method} {path} {version}", "Host: x", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(body, piece=8192):
    out = bytearray()
    for i in range(0, len(body), piece):
        part = body[i:i + piece]
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return bytes(out + b"0\r\n\r\n")


class Attacks(unittest.TestCase):
    def assert_error(self, response, status):
        self.assertEqual(response.status, status, response.raw[:500])
        error = response.json()["error"]
        self.assertTrue(error["message"])
        self.assertIsInstance(error["type"], str)

    def assert_serving(self):
        status, body = server.get("/health")
        self.assertEqual((status, json.loads(body)), (200, {"status": "ok"}))

    def attack(self, data, status):
        """Sends `data`; checks the error status, a prompt answer and the peak memory growth."""
        before = server.rss_bytes()
        server.reset_peak_rss()
        response = exchange(data)
        growth = server.peak_rss_bytes() - before
        self.assert_error(response, status)
        self.assertLess(response.seconds, 5, "answered only after a timeout")
        self.assertLess(growth, MEMORY_BOUND, f"peak memory grew by {growth / 2**20:.1f} MiB")
        self.assert_serving()
        return response

    def test_chunked_body_over_the_limit(self):
        body = json.dumps({"prompt": "hello " * ((20 << 20) // 6)}).encode()
        self.attack(request_bytes("POST", "/tokenize", {"Transfer-Encoding": "chunked"}, chunked(body)), 413)

    def test_gzip_bomb(self):
        body = gzip.compress(b'{"prompt": "' + b"a" * (64 << 20) + b'"}')
        self.assertLess(len(body), 100 << 10)
        self.attack(request_bytes("POST", "/tokenize", {"Content-Encoding": "gzip", "Content-Length": len(body)},
                                  body), 415)

    def test_a_million_header_fields(self):
        fields = b"".join(b"X-%d: v\r\n" % i for i in range(1_000_000))
        self.assertGreater(len(fields), 10 << 20)
        self.attack(b"GET /health HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n", 431)

    def test_content_length_with_transfer_encoding(self):
        smuggled = request_bytes("GET", "/v1/models", {})
        data = (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n"
                % (5 + len(smuggled)) + b"0\r\n\r\n" + smuggled)
        response = self.attack(data, 400)
        self.assertEqual(response.raw.count(b"HTTP/1.1 "), 1, response.raw)

    def test_bad_content_lengths_are_answered_at_once(self):
        for value, status in [("-1", 400), ("12abc", 400), ("1" + "0" * 30, 413), (str(MAX_BODY + 1), 413)]:
            with self.subTest(content_length=value):
                self.attack(request_bytes("POST", "/tokenize", {"Content-Length": value}), status)

    def test_chunked_request_is_served_like_its_content_length_twin(self):
        body = json.dumps({"prompt": "The quick brown fox"}).encode()
        plain = exchange(request_bytes("POST", "/tokenize", {"Content-Length": len(body)}, body))
        split = exchange(request_bytes("POST", "/tokenize", {"Transfer-Encoding": "chunked"}, chunked(body, 7)))
        self.assertEqual(plain.status, 200, plain.raw)
        self.assertEqual(split.status, 200, split.raw)
        self.assertEqual(split.json(), plain.json())
        self.assertGreater(len(plain.json()["tokens"]), 3)

    def test_http10_clients_get_no_chunked_answers(self):
        auth = {"Authorization": "Bearer " + API_KEY, "Content-Type": "application/json"}
        for stream in [False, True]:
            with self.subTest(stream=stream):
                body = json.dumps({"prompt": "hi", "max_tokens": 4, "temperature": 0, "stream": stream}).encode()
                response = exchange(request_bytes("POST", "/v1/completions", dict(auth, **{"Content-Length": len(body)}),
                                                  body, version="HTTP/1.0"))
                self.assertEqual(response.status, 200, response.raw)
                self.assertNotIn("transfer-encoding", response.headers)
                if stream:
                    events = [line for line in response.body.split(b"\n") if line.startswith(b"data: ")]
                    self.assertEqual(events[-1], b"data: [DONE]")
                    self.assertGreaterEqual(len(events), 2)
                else:
                    self.assertEqual(response.json()["usage"]["completion_tokens"], 4)

    def test_zz_no_server_errors(self):  # "zz": unittest runs it last
        self.assertEqual(server.metrics().get('tokenmill_http_responses_total{code="5xx"}', 0), 0)


if __name__ == "__main__":
    main("http_attacks_test.py")
