#!/usr/bin/python3
"""A stand-in for `tokenmill serve`, for developing and testing the web UI without a model.

It serves the page from disk (src/serve/web/index.html, so edits show without a rebuild),
GET /v1/models, POST /v1/chat/completions (streamed slowly as server-sent events, one word
per chunk; `max_tokens` chunks at most) and GET /metrics in the tokenmill_* Prometheus
names the real server uses, computed from what this mock is doing: streams in flight,
words sent in the last 10 s. A client that goes away mid-stream ends its stream.

    /usr/bin/python3 tests/serve/mock_openai_server.py --port 8080 [--api-key KEY]
"""

import argparse
import collections
import json
import pathlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = pathlib.Path(__file__).resolve().parents[2] / "src" / "serve" / "web" / "index.html"
MODEL = "mock-model"
WORDS = ("The quick brown fox jumps over the lazy dog while the mill turns tokens into text, "
         "one step at a time, for every stream in the batch.").split()
WINDOW_S = 10.0
KV_BLOCKS = 64


class State:
    """What /metrics reports, shared by the handler threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.running = 0
        self.generated = 0
        self.finished = collections.Counter()
        self.recent = collections.deque()  # send times of the words of the last WINDOW_S

    def word_sent(self):
        with self.lock:
            self.generated += 1
            self.recent.append(time.monotonic())

    def metrics(self):
        with self.lock:
            now = time.monotonic()
            while self.recent and self.recent[0] < now - WINDOW_S:
                self.recent.popleft()
            used = min(self.running * 4, KV_BLOCKS)
            lines = []

            def family(name, kind, value, help_text):
                lines.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"])

            family("tokenmill_num_requests_running", "gauge", self.running, "Requests in the running batch.")
            family("tokenmill_num_requests_waiting", "gauge", 0, "Requests queued, not yet running.")
            family("tokenmill_kv_cache_usage_ratio", "gauge", used / KV_BLOCKS, "Fraction of KV blocks in use.")
            family("tokenmill_kv_cache_used_blocks", "gauge", used, "KV blocks in use.")
            family("tokenmill_kv_cache_capacity_blocks", "gauge", KV_BLOCKS, "KV blocks in the pool.")
            family("tokenmill_generation_tokens_total", "counter", self.generated, "Tokens generated.")
            family("tokenmill_generation_tokens_per_second", "gauge", len(self.recent) / WINDOW_S,
                   "Tokens generated per second over the last 10 seconds.")
            lines += ["# HELP tokenmill_requests_finished_total Requests finished, by finish reason.",
                      "# TYPE tokenmill_requests_finished_total counter"]
            for reason in ("length", "stop", "cancelled"):
                lines.append(f'tokenmill_requests_finished_total{{reason="{reason}"}} {self.finished[reason]}')
            return "\n".join(lines) + "\n"


class Handler(BaseHTTPRequestHandler):
    state: State
    api_key: str
    chunk_delay: float

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass

    def send_body(self, status, content_type, body):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error_json(self, status, message, kind="invalid_request_error"):
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        self.send_body(status, "application/json", json.dumps(body))

    def authorized(self):
        if not self.api_key or self.headers.get("Authorization") == f"Bearer {self.api_key}":
            return True
        self.send_error_json(401, "invalid or missing API key", "authentication_error")
        return False

    def do_GET(self):
        if self.path == "/":
            self.send_body(200, "text/html; charset=utf-8", PAGE.read_bytes())
        elif self.path == "/metrics":
            self.send_body(200, "text/plain; version=0.0.4; charset=utf-8", self.state.metrics())
        elif self.path == "/v1/models":
            if self.authorized():
                body = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "tokenmill"}]}
                self.send_body(200, "application/json", json.dumps(body))
        else:
            self.send_error_json(404, f"no route {self.path}")

    def do_POST(self):
        if self.path != "/v1/chat/completions":
            self.send_error_json(404, f"no route {self.path}")
            return
        if not self.authorized():
            return
        try:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            max_tokens = int(request.get("max_tokens") or 16)
        except (ValueError, TypeError) as e:
            self.send_error_json(400, f"bad request body: {e}")
            return
        if not request.get("stream"):
            text = " ".join(WORDS[i % len(WORDS)] for i in range(max_tokens))
            body = {"id": "chatcmpl-mock", "object": "chat.completion", "created": int(time.time()), "model": MODEL,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "length"}]}
            self.send_body(200, "application/json", json.dumps(body))
            return
        self.stream(max_tokens)

    def stream(self, max_tokens):
        # HTTP/1.0 without a length: the body ends when the connection closes.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        with self.state.lock:
            self.state.running += 1
        reason = "cancelled"
        try:
            def event(delta, finish=None):
                chunk = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": int(time.time()),
                         "model": MODEL, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

            event({"role": "assistant", "content": ""})
            for i in range(max_tokens):
                time.sleep(self.chunk_delay)
                event({"content": ("" if i == 0 else " ") + WORDS[i % len(WORDS)]})
                self.state.word_sent()
            event({}, "length")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            reason = "length"
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away: its stream ends here
        finally:
            with self.state.lock:
                self.state.running -= 1
                self.state.finished[reason] += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0: any free port")
    parser.add_argument("--api-key", default="", help="require 'Authorization: Bearer KEY' on /v1 routes")
    parser.add_argument("--chunk-delay", type=float, default=0.15, help="seconds between streamed words")
    args = parser.parse_args()
    Handler.state = State()
    Handler.api_key = args.api_key
    Handler.chunk_delay = args.chunk_delay
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"listening on http://{args.host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
