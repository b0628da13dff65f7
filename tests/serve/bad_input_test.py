"""`tokenmill serve` against bad input over raw HTTP (http.client and sockets, no client library).

    python3 tests/serve/bad_input_test.py BUILD/tokenmill tests/fixtures [unittest args]

One server on tests/fixtures/hf/smollm_chat with an API key, --read-timeout 2,
--receive-timeout 4 and 8 HTTP threads (so that a handful of slow clients could occupy them all). Every bad request must get
a 4xx with an OpenAI-shaped JSON body {"error": {"message": "...", "type": "..."}} (naming the
field in "param" where there is one), and GET /health must answer 200 right after it:
malformed JSON, a body that is not an object, wrong types, negative numbers, NaN (not JSON)
and 1e999 (overflows a double), huge n, integers beyond 64 bits, invalid UTF-8 and lone
surrogate escapes, a 10 MB body and a 10 MB Content-Length (413), unknown routes and models
(404), a known route with another method (405 with Allow), a missing or wrong API key (401), a
prompt longer than the context, a max_tokens beyond the room the prompt leaves (400
context_length_exceeded, as OpenAI answers). Slow clients: half a
request line and then nothing is dropped within a few seconds while other clients are served;
headers trickled a byte per second on twice as many connections as HTTP threads must not lock
other clients out, and are cut within the receive timeout (slowloris).
At the end the server has answered no 5xx and still generates.
"""

import http.client
import json
import pathlib
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_process import serve  # noqa: E402

API_KEY = "sk-bad-input-test-7d2e"
AUTH = {"Authorization": "Bearer " + API_KEY}
CONTEXT = 256
READ_TIMEOUT = 2
RECEIVE_TIMEOUT = 4
HTTP_THREADS = 8

server = None
_server_context = None


def setUpModule():
    global server, _server_context
    binary, fixtures = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    _server_context = serve(binary, fixtures / "hf" / "smollm_chat", "--read-timeout", READ_TIMEOUT,
                            "--receive-timeout", RECEIVE_TIMEOUT,
                            "--http-threads", HTTP_THREADS, threads=2, api_key=API_KEY)
    server = _server_context.__enter__()


def tearDownModule():
    _server_context.__exit__(None, None, None)


def request(method, path, body=b"", headers=None, timeout=30):
    """(status, parsed JSON or raw bytes, headers) of one request on a fresh connection.
    A body the server stops reading (413) may fail to send; the response is read anyway."""
    connection = http.client.HTTPConnection(*server.host_port(), timeout=timeout)
    try:
        all_headers = {"Connection": "close", "Content-Type": "application/json"}
        all_headers.update(headers or {})
        try:
            connection.request(method, path, body=body, headers=all_headers)
        except (BrokenPipeError, ConnectionResetError):
            pass
        response = connection.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw), dict(response.getheaders())
        except ValueError:
            return response.status, raw, dict(response.getheaders())
    finally:
        connection.close()


def post(path, body, headers=AUTH):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return request("POST", path, data, headers)


class BadInput(unittest.TestCase):
    def assert_error(self, status, body, expected_status, param=None, code=None):
        self.assertEqual(status, expected_status, body)
        self.assertIsInstance(body, dict, body)
        error = body.get("error")
        self.assertIsInstance(error, dict, body)
        self.assertIsInstance(error.get("message"), str)
        self.assertTrue(error["message"])
        self.assertIsInstance(error.get("type"), str)
        if param is not None:
            self.assertEqual(error.get("param"), param, body)
            self.assertIn(param.split("[")[0].split(".")[0], error["message"])
        if code is not None:
            self.assertEqual(error.get("code"), code, body)

    def assert_serving(self):
        status, body, _ = request("GET", "/health", timeout=10)
        self.assertEqual((status, body), (200, {"status": "ok"}))

    def check(self, path, body, expected_status, param=None, code=None, headers=AUTH):
        with self.subTest(path=path, body=body if len(body) < 200 else f"{len(body)} bytes"):
            status, response, _ = post(path, body, headers)
            self.assert_error(status, response, expected_status, param, code)
            self.assert_serving()

    def test_malformed_json(self):
        for body in [b'{"prompt": "hi",', b'{"prompt": hi}', b"", b"{]", b'{"prompt": "hi"} trailing',
                     b'{"prompt": "hi", "max_tokens": NaN}', b'{"prompt": "hi", "temperature": Infinity}',
                     b'{"prompt": "hi", "temperature": 1e999}', b'{"prompt": "hi", "max_tokens": -1e999}']:
            self.check("/v1/completions", body, 400)

    def test_body_not_an_object(self):
        for body in [b"[1, 2]", b'"prompt"', b"42", b"null"]:
            self.check("/v1/completions", body, 400)
            self.check("/v1/chat/completions", body, 400)

    def test_wrong_types(self):
        for field, value, param in [("temperature", "hot", "temperature"), ("max_tokens", "ten", "max_tokens"),
                                    ("max_tokens", 2.5, "max_tokens"), ("n", True, "n"), ("stream", "yes", "stream"),
                                    ("stop", 7, "stop"), ("stop", [1], "stop[0]"), ("logprobs", "2", "logprobs"),
                                    ("seed", "s", "seed"), ("top_p", [1], "top_p"), ("ignore_eos", 1, "ignore_eos"),
                                    ("prompt", {"text": "hi"}, "prompt")]:
            self.check("/v1/completions", {"prompt": "hi", field: value}, 400, param=param)
        chat = {"messages": [{"role": "user", "content": "hi"}]}
        self.check("/v1/chat/completions", {"messages": "hi"}, 400, param="messages")
        self.check("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, 400,
                   param="messages[0].content")
        self.check("/v1/chat/completions", {"messages": [{"content": "hi"}]}, 400, param="messages[0].role")
        self.check("/v1/chat/completions", dict(chat, top_logprobs="2", logprobs=True), 400, param="top_logprobs")
        self.check("/v1/chat/completions", dict(chat, stream_options={"include_usage": True}), 400,
                   param="stream_options")
        self.check("/tokenize", {"prompt": 5}, 400, param="prompt")
        self.check("/detokenize", {"tokens": "1 2"}, 400, param="tokens")

    def test_negative_and_out_of_range_numbers(self):
        for field, value in [("max_tokens", -5), ("max_tokens", 0), ("temperature", -1), ("temperature", 2.5),
                             ("top_p", -0.5), ("top_p", 0), ("n", -1), ("n", 0), ("logprobs", -1),
                             ("frequency_penalty", -3), ("presence_penalty", 1e300), ("top_k", -5),
                             ("seed", 1e300), ("min_p", 2)]:
            self.check("/v1/completions", {"prompt": "hi", field: value}, 400, param=field)

    def test_huge_numbers(self):
        self.check("/v1/completions", {"prompt": "hi", "n": 1000000}, 400, param="n")
        self.check("/v1/completions", b'{"prompt": "hi", "n": 99999999999999999999999999}', 400, param="n")
        self.check("/v1/completions", {"prompt": "hi", "logprobs": 10 ** 9}, 400, param="logprobs")
        self.check("/v1/completions", {"prompt": [7, 10 ** 12]}, 400, param="prompt[1]")
        self.check("/detokenize", {"tokens": [1, -1]}, 400, param="tokens[1]")

    def test_max_tokens_over_the_room_left(self):
        for max_tokens in [b"1e30", b"99999999999999999999999999", b"9223372036854775807", b"%d" % (CONTEXT - 2)]:
            body = b'{"prompt": [1, 2, 3], "temperature": 0, "ignore_eos": true, "max_tokens": ' + max_tokens + b"}"
            self.check("/v1/completions", body, 400, param="max_tokens", code="context_length_exceeded")
        status, response, _ = post("/v1/completions", {"prompt": [1, 2, 3], "temperature": 0, "ignore_eos": True,
                                                       "max_tokens": CONTEXT - 3})
        self.assertEqual(status, 200, response)
        self.assertEqual(response["usage"]["completion_tokens"], CONTEXT - 3)
        self.assertEqual(response["choices"][0]["finish_reason"], "length")

    def test_prompt_longer_than_the_context(self):
        self.check("/v1/completions", {"prompt": [5] * CONTEXT}, 400, param="prompt",
                   code="context_length_exceeded")
        long_text = "word " * (CONTEXT * 2)
        self.check("/v1/chat/completions", {"messages": [{"role": "user", "content": long_text}]}, 400,
                   code="context_length_exceeded")

    def test_invalid_utf8_and_lone_surrogates(self):
        for body in [b'{"prompt": "hi \xff\xfe there"}', b'{"prompt": "\xc3\x28"}', b'{"prompt": "\xed\xa0\x80"}',
                     b'{"prompt": "hi \\ud800 there"}', b'{"prompt": "\\udc00"}']:
            self.check("/v1/completions", body, 400)
        self.check("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\xe2\x82"}]}', 400)
        self.check("/tokenize", b'{"prompt": "\xf8\x88\x80\x80\x80"}', 400)

    def test_body_over_the_limit(self):
        big = json.dumps({"prompt": "a" * (10 << 20)}).encode()
        self.check("/v1/completions", big, 413)
        # A 10 MB Content-Length is refused from the header alone: nothing more is sent.
        status, response, _ = request("POST", "/v1/completions", b"", dict(AUTH, **{"Content-Length": str(10 << 20)}),
                                      timeout=READ_TIMEOUT + 8)
        self.assert_error(status, response, 413)
        self.assert_serving()

    def test_unknown_routes(self):
        for method, path in [("GET", "/v2/models"), ("GET", "/v1/engines"), ("POST", "/v1/audio/speech"),
                             ("GET", "/nothing/here"), ("PUT", "/healthz")]:
            with self.subTest(method=method, path=path):
                status, body, _ = request(method, path, b"{}", AUTH)
                self.assert_error(status, body, 404)
                self.assert_serving()

    def test_known_routes_with_another_method(self):
        for method, path, allow in [("GET", "/v1/completions", "POST"), ("PUT", "/v1/chat/completions", "POST"),
                                    ("POST", "/health", "GET, HEAD"), ("DELETE", "/v1/models", "GET, HEAD")]:
            with self.subTest(method=method, path=path):
                status, body, headers = request(method, path, b"{}", AUTH)
                self.assert_error(status, body, 405)
                self.assertEqual(headers.get("Allow"), allow)
                self.assert_serving()

    def test_unknown_model(self):
        self.check("/v1/completions", {"model": "gpt-4o", "prompt": "hi"}, 404, param="model", code="model_not_found")
        self.check("/v1/chat/completions", {"model": "x", "messages": [{"role": "user", "content": "hi"}]}, 404,
                   code="model_not_found")

    def test_api_key(self):
        body = {"prompt": "hi", "max_tokens": 1}
        for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer " + API_KEY + "x"},
                        {"Authorization": "Bearer " + API_KEY[:-1]}, {"Authorization": "Basic " + API_KEY},
                        {"Authorization": API_KEY}, {"Authorization": "Bearer "}]:
            with self.subTest(headers=headers):
                status, response, _ = post("/v1/completions", body, headers)
                self.assert_error(status, response, 401)
                self.assert_serving()
        status, response, _ = request("GET", "/v1/models", headers={})
        self.assert_error(status, response, 401)
        self.assertEqual(post("/v1/completions", body)[0], 200)
        self.assertEqual(request("GET", "/v1/models", headers=AUTH)[0], 200)

    def assert_dropped(self, sent, within):
        """A connection that sent `sent` and then stalls is closed by the server within `within`
        seconds, while another client is served meanwhile."""
        stalled = socket.create_connection(server.host_port())
        stalled.sendall(sent)
        start = time.monotonic()
        self.assert_serving()
        stalled.settimeout(within + 5)
        try:
            while stalled.recv(4096):
                pass
        except socket.timeout:
            self.fail(f"the server kept a stalled connection open for {within + 5} s")
        except ConnectionResetError:
            pass
        finally:
            stalled.close()
        self.assertLess(time.monotonic() - start, within)
        self.assert_serving()

    def test_half_a_request_line_is_dropped(self):
        self.assert_dropped(b"POST /v1/compl", within=READ_TIMEOUT + 3)

    def test_stalled_body_is_dropped(self):
        # The read timeout cuts the body; the connection is closed after the 400.
        self.assert_dropped(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Authorization: Bearer " + API_KEY.encode() + b"\r\nContent-Length: 100\r\n\r\n"
                            b'{"prompt":', within=READ_TIMEOUT + 8)

    def test_trickled_headers_do_not_lock_others_out(self):
        """Slowloris: twice as many clients as HTTP threads send their headers one byte a second
        (never stalling for the read timeout; the headers would take 45 s). Another client is
        still served at once (connections accepted while every thread is busy cut the
        longest-waiting unfinished requests), and every trickling client is cut within the
        receive timeout."""
        header = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 10 + b"\r\n\r\n"
        sockets = [socket.create_connection(server.host_port()) for _ in range(2 * HTTP_THREADS)]
        cut = [False] * len(sockets)  # the server closed it
        start = time.monotonic()

        def trickle():
            for byte in header:
                for i, s in enumerate(sockets):
                    if not cut[i]:
                        try:
                            s.sendall(bytes([byte]))
                        except OSError:
                            cut[i] = True
                if all(cut):
                    return
                time.sleep(1)

        dripper = threading.Thread(target=trickle, daemon=True)
        dripper.start()
        try:
            time.sleep(1.5)
            try:
                status, _, _ = request("GET", "/health", timeout=READ_TIMEOUT + 8)
            except OSError as e:
                status = e
            self.assertEqual(status, 200, f"GET /health was not answered within {READ_TIMEOUT + 8} s while "
                                          f"{len(sockets)} clients trickled their headers")
            dripper.join(timeout=RECEIVE_TIMEOUT + 10)
            self.assertTrue(all(cut), f"{cut.count(False)} trickling clients were not cut after "
                                      f"{time.monotonic() - start:.0f} s")
        finally:
            for s in sockets:
                s.close()
            dripper.join()
        self.assert_serving()

    def test_zz_no_server_errors_and_still_generating(self):  # "zz": unittest runs it last
        status, response, _ = post("/v1/completions", {"prompt": "hi", "max_tokens": 3, "temperature": 0})
        self.assertEqual(status, 200, response)
        self.assertEqual(response["usage"]["completion_tokens"], 3)
        self.assertEqual(server.metrics().get('tokenmill_http_responses_total{code="5xx"}', 0), 0)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: bad_input_test.py TOKENMILL_BINARY FIXTURES_DIR [unittest args]")
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
