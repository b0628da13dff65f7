#!/usr/bin/env python3
"""Writes fuzz/corpus/http_request (seed requests as they come off a connection; the first
byte picks the read size) and fuzz/http.dict (framing fields and values). Run from the
repository root."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus_writer import write_corpus  # noqa: E402

seeds = [
    b"GET /health HTTP/1.1\r\nHost: localhost:8000\r\nAccept: */*\r\n\r\n",
    b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n"
    b'{"prompt": "hi"}\n',
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    b'5\r\n{"pro\r\n7;ext=1\r\nmpt": 1\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n',
    b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /ready HTTP/1.1\r\n\r\n",
    b"POST /x HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST /x HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
    b"\r\n\r\nPUT /a%20b?q=1 HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
]
write_corpus("fuzz/corpus/http_request", ((f"seed{i}", bytes([i * 9]) + s) for i, s in enumerate(seeds)))
words = ["\r\n", "\r\n\r\n", ": ", "HTTP/1.1", "HTTP/1.0", "Content-Length", "Transfer-Encoding", "chunked",
         "Content-Encoding", "identity", "gzip", "Expect", "100-continue", "Connection", "close", "0\r\n\r\n",
         "FFFFFFFF", ";"]
with open("fuzz/http.dict", "w") as f:
    for w in words:
        f.write('"' + w.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "\\x0d").replace("\n", "\\x0a") + '"\n')
