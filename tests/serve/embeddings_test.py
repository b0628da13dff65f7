"""POST /v1/embeddings through the official `openai` client.

    python3 tests/serve/embeddings_test.py BUILD/tokenmill tests/fixtures [unittest args]

One server on tests/fixtures/hf/smollm_chat (hidden size 64, a real tokenizer). Every
embedding is 64 floats of unit length; an input asked alone again gives the same bits, as
text or as its token ids too, as floats or as base64; among others (or asked again among
others) it is equal to float32 rounding; `dimensions` keeps the first values and renormalises; bad requests are 400s
naming the field. Where torch and transformers are
installed, the embeddings also equal transformers' final hidden state of the last token,
normalised (to 1e-5). A copy of the model whose sentence-transformers config asks for mean
pooling is refused, naming the mode.
"""

import base64
import json
import math
import pathlib
import shutil
import struct
import sys
import tempfile
import unittest

import openai

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_process import assert_bad_requests, main, serve  # noqa: E402

TEXTS = ["ROMEO: But soft, what light", "Hello there", "ROMEO: But soft", "a"]
HIDDEN = 64


def setUpModule():
    global server, _server_context, fixtures, binary
    binary, fixtures = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    _server_context = serve(binary, fixtures / "hf" / "smollm_chat", threads=2)
    server = _server_context.__enter__()


def tearDownModule():
    _server_context.__exit__(None, None, None)


def client_of(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)


class Embeddings(unittest.TestCase):
    def setUp(self):
        self.client = client_of(server.url)
        self.addCleanup(self.client.close)

    def embed(self, input, **kwargs):
        return self.client.embeddings.create(model=server.model_id, input=input, encoding_format="float",
                                             **kwargs)

    def test_each_input_gets_a_unit_vector_of_the_hidden_size(self):
        response = self.embed(TEXTS)
        self.assertEqual([d.index for d in response.data], list(range(len(TEXTS))))
        for d in response.data:
            self.assertEqual(len(d.embedding), HIDDEN)
            self.assertAlmostEqual(math.fsum(v * v for v in d.embedding), 1.0, places=5)
        self.assertEqual(response.model, server.model_id)
        tokens = sum(len(self.client.post("/../tokenize", body={"prompt": t}, cast_to=object)["tokens"])
                     for t in TEXTS)
        self.assertEqual(response.usage.prompt_tokens, tokens)
        self.assertEqual(response.usage.total_tokens, tokens)

    def assert_close(self, a, b, what):
        self.assertLess(max(abs(x - y) for x, y in zip(a, b)), 1e-5, what)

    def test_an_input_gets_the_same_vector_alone_among_others_and_as_token_ids(self):
        # An input runs in a batch of a size that depends on which other inputs reach the
        # engine's step with it (several inputs of one request arrive one after the other, so a
        # loaded machine groups them otherwise), and a batch of another size may take a float
        # matmul kernel that rounds differently (model/paged_transformer.h): equal to float32
        # rounding. One input alone runs alone every time: the same bits.
        together = [d.embedding for d in self.embed(TEXTS).data]
        for text, a, b in zip(TEXTS, [d.embedding for d in self.embed(TEXTS).data], together):
            self.assert_close(a, b, "asked again: " + text)
        alone = [self.embed(text).data[0].embedding for text in TEXTS]
        for text, a, b in zip(TEXTS, alone, together):
            self.assert_close(a, b, "alone: " + text)
        ids = self.client.post("/../tokenize", body={"prompt": TEXTS[0]}, cast_to=object)["tokens"]
        self.assertEqual(self.embed(ids).data[0].embedding, alone[0])
        self.assert_close(self.embed([ids, TEXTS[1]]).data[0].embedding,
                          self.embed([TEXTS[0], TEXTS[1]]).data[0].embedding, "as token ids among others")
        self.assertGreater(max(abs(x - y) for x, y in zip(together[0], together[2])), 1e-2)  # a prefix differs

    def test_base64_holds_the_same_floats(self):
        floats = self.embed(TEXTS[1]).data[0].embedding
        raw = self.client.embeddings.create(model=server.model_id, input=TEXTS[1], encoding_format="base64")
        decoded = struct.unpack(f"<{HIDDEN}f", base64.b64decode(raw.data[0].embedding))
        self.assertEqual(list(decoded), floats)
        # The client's default asks for base64 and decodes it itself.
        self.assertEqual(self.client.embeddings.create(model=server.model_id, input=TEXTS[1]).data[0].embedding,
                         floats)

    def test_dimensions_keep_the_first_values_renormalised(self):
        full = self.embed(TEXTS[0]).data[0].embedding
        short = self.embed(TEXTS[0], dimensions=16).data[0].embedding
        norm = math.sqrt(math.fsum(v * v for v in full[:16]))
        self.assertEqual(len(short), 16)
        for a, b in zip(short, full[:16]):
            self.assertAlmostEqual(a, b / norm, places=6)

    def test_bad_requests_name_the_field(self):
        assert_bad_requests(self, self.embed, [
            ({"input": []}, "input"),
            ({"input": ""}, "input"),
            ({"input": [[]]}, "input[0]"),
            ({"input": [1, 10 ** 6]}, "input[1]"),
            ({"input": "x", "dimensions": 0}, "dimensions"),
            ({"input": "x", "dimensions": HIDDEN + 1}, "dimensions"),
        ], openai.BadRequestError)
        with self.assertRaises(openai.BadRequestError) as raised:
            self.client.embeddings.create(model=server.model_id, input="x", encoding_format="hex")
        self.assertEqual(raised.exception.param, "encoding_format")
        with self.assertRaises(openai.NotFoundError):
            self.client.embeddings.create(model="another-model", input="x")

    def test_transformers_computes_the_same_vectors(self):
        try:
            import numpy as np
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            self.skipTest("torch and transformers are not installed")
        directory = fixtures / "hf" / "smollm_chat"
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
        for text, d in zip(TEXTS, self.embed(TEXTS).data):
            with torch.no_grad():
                hidden = model.model(input_ids=torch.tensor([tokenizer(text)["input_ids"]])).last_hidden_state
            reference = hidden[0, -1].numpy()
            reference = reference / np.linalg.norm(reference)
            self.assertLess(float(np.abs(np.array(d.embedding) - reference).max()), 1e-5, text)

    def test_a_model_pooling_by_mean_is_refused_naming_the_mode(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = pathlib.Path(tmp) / "mean_pooled"
            shutil.copytree(fixtures / "hf" / "smollm_chat", model)
            (model / "modules.json").write_text(json.dumps([
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
            (model / "1_Pooling").mkdir()
            (model / "1_Pooling" / "config.json").write_text(json.dumps(
                {"word_embedding_dimension": HIDDEN, "pooling_mode_mean_tokens": True,
                 "pooling_mode_lasttoken": False}))
            with serve(binary, model, threads=1) as mean_server:
                client = client_of(mean_server.url)
                with self.assertRaises(openai.BadRequestError) as raised:
                    client.embeddings.create(model=mean_server.model_id, input="x")
                self.assertIn("'mean_tokens'", raised.exception.message)
                client.close()


if __name__ == "__main__":
    main(__file__)
