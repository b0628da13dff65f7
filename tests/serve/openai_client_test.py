"""`tokenmill serve` driven by the official `openai` Python client (PyPI), unchanged.

    python3 tests/serve/openai_client_test.py BUILD/tokenmill tests/fixtures [unittest args]

One server on tests/fixtures/hf/smollm_chat (tiny random weights, the real SmolLM2 tokenizer
and chat template, a 256-token context) with an API key. Checked through the client:
completions and chat, streamed and not (the same text at temperature 0), n > 1 (one choice
per index, reproducible with a seed, streamed like not), stop strings (the text ends right
before the first occurrence, also one that spans two tokens), logprobs (completions
`logprobs`, chat `logprobs` + `top_logprobs`: values <= 0, the greedy token is the top one),
usage (prompt tokens as /tokenize counts them, completion tokens as generated), max_tokens
clamped to the room left in the context, the API key (AuthenticationError without it or with
a wrong one), and errors (BadRequestError naming the mistyped field, NotFoundError for
another model, the context-length error).
"""

import json
import math
import pathlib
import sys
import unittest
import urllib.request

import openai

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_process import serve  # noqa: E402

API_KEY = "sk-tokenmill-test-4f1c9a"
CONTEXT = 256
PROMPT = "The quick brown fox jumps over the lazy dog. Once upon a time"
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Tell me a story about a mill."},
]

server = None
_server_context = None


def setUpModule():
    global server, _server_context
    binary, fixtures = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    _server_context = serve(binary, fixtures / "hf" / "smollm_chat", threads=2, api_key=API_KEY)
    server = _server_context.__enter__()


def tearDownModule():
    _server_context.__exit__(None, None, None)


def client(api_key=API_KEY):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=api_key, max_retries=0, timeout=60)


def token_count(body):
    """Tokens of a /tokenize body ({"prompt": ...} or {"messages": ...}), as the server counts."""
    request = urllib.request.Request(server.url + "/tokenize", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["count"]


def streamed_texts(stream, text_of):
    """{choice index: concatenated text} and {index: finish_reason} of a stream."""
    texts, finishes = {}, {}
    for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (text_of(choice) or "")
            if choice.finish_reason is not None:
                finishes[choice.index] = choice.finish_reason
    return texts, finishes


class ClientTest(unittest.TestCase):
    """A test with its own client (closed after it)."""

    def setUp(self):
        self.client = client()
        self.addCleanup(self.client.close)


class Completions(ClientTest):
    def complete(self, **kwargs):
        args = {"model": server.model_id, "prompt": PROMPT, "max_tokens": 12, "temperature": 0}
        args.update(kwargs)
        return self.client.completions.create(**args)

    def test_models_lists_the_served_model(self):
        models = self.client.models.list().data
        self.assertEqual([m.id for m in models], ["smollm_chat"])

    def test_stream_gives_the_non_streamed_text(self):
        whole = self.complete()
        self.assertEqual(len(whole.choices), 1)
        self.assertTrue(whole.choices[0].text)
        texts, finishes = streamed_texts(self.complete(stream=True), lambda c: c.text)
        self.assertEqual(texts, {0: whole.choices[0].text})
        self.assertEqual(finishes, {0: whole.choices[0].finish_reason})

    def test_usage(self):
        response = self.complete(max_tokens=9, extra_body={"ignore_eos": True})
        usage = response.usage
        self.assertEqual(usage.prompt_tokens, token_count({"prompt": PROMPT}))
        self.assertEqual(usage.completion_tokens, 9)
        self.assertEqual(usage.total_tokens, usage.prompt_tokens + 9)
        self.assertEqual(response.choices[0].finish_reason, "length")
        chunks = list(self.complete(max_tokens=9, stream=True, stream_options={"include_usage": True},
                                    extra_body={"ignore_eos": True}))
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.prompt_tokens, usage.prompt_tokens)
        self.assertEqual(chunks[-1].usage.completion_tokens, usage.completion_tokens)
        self.assertTrue(all(c.usage is None for c in chunks[:-1]))

    def test_n_choices_are_indexed_and_reproducible_with_a_seed(self):
        args = {"n": 3, "temperature": 1.0, "seed": 1234, "max_tokens": 10}
        first = self.complete(**args)
        self.assertEqual(sorted(c.index for c in first.choices), [0, 1, 2])
        again = self.complete(**args)
        self.assertEqual([c.text for c in again.choices], [c.text for c in first.choices])
        texts, _ = streamed_texts(self.complete(stream=True, **args), lambda c: c.text)
        self.assertEqual(texts, {c.index: c.text for c in first.choices})
        self.assertEqual(first.usage.prompt_tokens, token_count({"prompt": PROMPT}))  # the prompt once
        self.assertEqual(first.usage.completion_tokens, 30)

    def test_two_prompts_times_n(self):
        response = self.complete(prompt=[PROMPT, "Hello"], n=2, max_tokens=4)
        self.assertEqual(sorted(c.index for c in response.choices), [0, 1, 2, 3])
        by_index = {c.index: c.text for c in response.choices}
        self.assertEqual(by_index[0], by_index[1])  # greedy: the choices of a prompt agree
        self.assertEqual(by_index[0], self.complete(max_tokens=4).choices[0].text)
        self.assertEqual(by_index[2], self.complete(prompt="Hello", max_tokens=4).choices[0].text)

    def test_stop_string_ends_the_text_before_it(self):
        full = self.complete(max_tokens=24, logprobs=0, extra_body={"ignore_eos": True}).choices[0]
        offsets = full.logprobs.text_offset
        # A stop string made of the last character of token 5 and the first of token 6.
        boundary = offsets[6]
        stop = full.text[boundary - 1:boundary + 1]
        expected = full.text[:full.text.index(stop)]
        cut = self.complete(max_tokens=24, stop=[stop, "never appears \u00e9"]).choices[0]
        self.assertEqual(cut.text, expected)
        self.assertEqual(cut.finish_reason, "stop")
        texts, finishes = streamed_texts(self.complete(max_tokens=24, stop=stop, stream=True), lambda c: c.text)
        self.assertEqual(texts, {0: expected})
        self.assertEqual(finishes, {0: "stop"})

    def test_logprobs(self):
        response = self.complete(logprobs=2, extra_body={"ignore_eos": True})
        choice = response.choices[0]
        lp = choice.logprobs
        self.assertEqual(len(lp.tokens), response.usage.completion_tokens)
        self.assertEqual(len(lp.token_logprobs), len(lp.tokens))
        self.assertEqual(len(lp.top_logprobs), len(lp.tokens))
        self.assertEqual(lp.text_offset, sorted(lp.text_offset))
        for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
            self.assertTrue(math.isfinite(logprob) and logprob <= 0, logprob)
            self.assertEqual(len(top), 2)
            self.assertTrue(all(v <= 0 for v in top.values()), top)
            self.assertAlmostEqual(logprob, max(top.values()), places=5)  # greedy: the top token
            self.assertIn(token, top)
        texts, _ = streamed_texts(self.complete(logprobs=2, stream=True, extra_body={"ignore_eos": True}),
                                  lambda c: c.text)
        self.assertEqual(texts, {0: choice.text})

    def test_max_tokens_over_the_room_left_is_refused(self):
        prompt_tokens = token_count({"prompt": PROMPT})
        with self.assertRaises(openai.BadRequestError) as raised:
            self.complete(max_tokens=CONTEXT - prompt_tokens + 1)
        self.assertEqual(raised.exception.code, "context_length_exceeded")
        self.assertEqual(raised.exception.param, "max_tokens")
        response = self.complete(max_tokens=CONTEXT - prompt_tokens, extra_body={"ignore_eos": True})
        self.assertEqual(response.usage.completion_tokens, CONTEXT - prompt_tokens)
        self.assertEqual(response.choices[0].finish_reason, "length")

    def test_prompt_longer_than_the_context(self):
        with self.assertRaises(openai.BadRequestError) as raised:
            self.complete(prompt=[5] * CONTEXT)
        self.assertEqual(raised.exception.code, "context_length_exceeded")
        self.assertIn(str(CONTEXT), raised.exception.message)

    def test_wrong_types_name_the_field(self):
        for field, value in [("temperature", "hot"), ("max_tokens", "ten"), ("n", 2.5), ("logprobs", 99),
                             ("stop", 7), ("top_p", 0), ("seed", "s")]:
            with self.subTest(field=field), self.assertRaises(openai.BadRequestError) as raised:
                self.complete(**{field: value})
            self.assertEqual(raised.exception.param, field)
            self.assertIn(field, raised.exception.message)
            self.assertEqual(raised.exception.status_code, 400)

    def test_unknown_model(self):
        with self.assertRaises(openai.NotFoundError) as raised:
            self.complete(model="gpt-5-mini")
        self.assertEqual(raised.exception.code, "model_not_found")


class Chat(ClientTest):
    def chat(self, **kwargs):
        args = {"model": server.model_id, "messages": MESSAGES, "max_tokens": 12, "temperature": 0}
        args.update(kwargs)
        return self.client.chat.completions.create(**args)

    def test_stream_gives_the_non_streamed_message(self):
        whole = self.chat()
        message = whole.choices[0].message
        self.assertEqual(message.role, "assistant")
        self.assertTrue(message.content)
        roles = []
        texts, finishes = streamed_texts(self.chat(stream=True),
                                         lambda c: roles.append(c.delta.role) or c.delta.content)
        self.assertEqual(roles[0], "assistant")
        self.assertEqual(texts, {0: message.content})
        self.assertEqual(finishes, {0: whole.choices[0].finish_reason})

    def test_usage_counts_the_rendered_template(self):
        response = self.chat(max_tokens=7, extra_body={"ignore_eos": True})
        prompt_tokens = token_count({"messages": MESSAGES})
        self.assertEqual(response.usage.prompt_tokens, prompt_tokens)
        self.assertEqual(response.usage.completion_tokens, 7)
        self.assertEqual(response.usage.total_tokens, prompt_tokens + 7)

    def test_n_choices_with_a_seed(self):
        args = {"n": 2, "temperature": 0.9, "seed": 99, "max_tokens": 8}
        first = self.chat(**args)
        self.assertEqual(sorted(c.index for c in first.choices), [0, 1])
        again = self.chat(**args)
        self.assertEqual([c.message.content for c in again.choices], [c.message.content for c in first.choices])
        texts, _ = streamed_texts(self.chat(stream=True, **args), lambda c: c.delta.content)
        self.assertEqual(texts, {c.index: c.message.content for c in first.choices})

    def test_stop_string(self):
        full = self.chat(max_tokens=20, extra_body={"ignore_eos": True}).choices[0].message.content
        stop = full[7:9]
        cut = self.chat(max_tokens=20, stop=stop).choices[0]
        self.assertEqual(cut.message.content, full[:full.index(stop)])
        self.assertEqual(cut.finish_reason, "stop")

    def test_logprobs(self):
        response = self.chat(logprobs=True, top_logprobs=2, extra_body={"ignore_eos": True})
        content = response.choices[0].logprobs.content
        self.assertEqual(len(content), response.usage.completion_tokens)
        for item in content:
            self.assertTrue(math.isfinite(item.logprob) and item.logprob <= 0, item.logprob)
            self.assertEqual(len(item.top_logprobs), 2)
            tops = [t.logprob for t in item.top_logprobs]
            self.assertTrue(all(v <= 0 for v in tops), tops)
            self.assertEqual(tops, sorted(tops, reverse=True))
            self.assertAlmostEqual(item.logprob, tops[0], places=5)  # greedy: the top token
            self.assertEqual(item.token, item.top_logprobs[0].token)
        with self.assertRaises(openai.BadRequestError) as raised:
            self.chat(top_logprobs=2)  # without logprobs: true
        self.assertEqual(raised.exception.param, "top_logprobs")

    def test_max_tokens_defaults_to_the_room_left(self):
        prompt_tokens = token_count({"messages": MESSAGES})
        response = self.chat(max_tokens=None, extra_body={"ignore_eos": True})
        self.assertEqual(response.usage.completion_tokens, CONTEXT - prompt_tokens)

    def test_wrong_types_name_the_field(self):
        bad = [("messages", [{"role": "user", "content": 5}], "messages[0].content"),
               ("messages", [{"role": "wizard", "content": "hi"}], "messages[0].role"),
               ("messages", [], "messages"),
               ("temperature", 3, "temperature"),
               ("presence_penalty", "lots", "presence_penalty")]
        for field, value, param in bad:
            with self.subTest(param=param), self.assertRaises(openai.BadRequestError) as raised:
                self.chat(**{field: value})
            self.assertEqual(raised.exception.param, param)
            self.assertIn(param.split(".")[0].split("[")[0], raised.exception.message)

    def test_unknown_model(self):
        with self.assertRaises(openai.NotFoundError):
            self.chat(model="llama-9000")


class ApiKey(unittest.TestCase):
    def test_wrong_key(self):
        with client(api_key="sk-wrong") as wrong, self.assertRaises(openai.AuthenticationError):
            wrong.models.list()
        with client(api_key=API_KEY + "x") as longer, self.assertRaises(openai.AuthenticationError):
            longer.completions.create(model=server.model_id, prompt="hi", max_tokens=1)

    def test_no_key(self):
        with client() as keyless, self.assertRaises(openai.AuthenticationError) as raised:
            keyless.chat.completions.create(model=server.model_id, messages=MESSAGES, max_tokens=1,
                                            extra_headers={"Authorization": openai.Omit()})
        self.assertEqual(raised.exception.status_code, 401)

    def test_right_key(self):
        with client() as keyed:
            response = keyed.completions.create(model=server.model_id, prompt="hi", max_tokens=1)
        self.assertEqual(len(response.choices), 1)

    def test_health_needs_no_key(self):
        self.assertEqual(server.get("/health")[0], 200)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: openai_client_test.py TOKENMILL_BINARY FIXTURES_DIR [unittest args]")
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
