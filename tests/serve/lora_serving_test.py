"""Multi-LoRA serving through the official `openai` client.

    python3 tests/serve/lora_serving_test.py BUILD/tokenmill tests/fixtures [unittest args]

One server on tests/fixtures/hf/smollm_chat with two PEFT adapters (tests/fixtures/lora/
smollm_chat and smollm_chat_qv, made by make_lora_fixtures.py) as models "all" and "qv".
/v1/models lists the model and both adapters; a greedy completion of the fixtures' prompt ids
gives PEFT's greedy tokens for each adapter and the base model's without one, also streamed,
and also when requests of all three run at once; an unknown model is a 404 that names the
served ones; the server refuses to start on an adapter of another model, naming it.
"""

import json
import pathlib
import subprocess
import sys
import threading
import unittest
import urllib.request

import openai

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_process import main, serve  # noqa: E402


def setUpModule():
    global server, _server_context, fixtures, binary, expected
    binary, fixtures = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    lora = fixtures / "lora"
    expected = {name: json.loads((lora / name / "expected.json").read_text()) for name in ("smollm_chat", "smollm_chat_qv")}
    _server_context = serve(binary, fixtures / "hf" / "smollm_chat", "--lora", f"all={lora / 'smollm_chat'}",
                            "--lora", f"qv={lora / 'smollm_chat_qv'}", threads=2)
    server = _server_context.__enter__()


def tearDownModule():
    _server_context.__exit__(None, None, None)


def client_of(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)


# The tokens each served name must give: PEFT's greedy continuation of the fixtures' ids.
def want(model):
    if model == "all":
        return expected["smollm_chat"]["greedy"]
    if model == "qv":
        return expected["smollm_chat_qv"]["greedy"]
    return expected["smollm_chat"]["base_greedy"]


class LoraServing(unittest.TestCase):
    def setUp(self):
        self.client = client_of(server.url)
        self.addCleanup(self.client.close)
        self.ids = expected["smollm_chat"]["ids"]

    def detokenized(self, tokens):
        request = urllib.request.Request(server.url + "/detokenize", data=json.dumps({"tokens": tokens}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["prompt"]

    def complete(self, model, **kwargs):
        return self.client.completions.create(model=model, prompt=self.ids, max_tokens=12, temperature=0,
                                              extra_body={"ignore_eos": True, "skip_special_tokens": False},
                                              **kwargs)

    def test_models_lists_the_model_and_its_adapters(self):
        listed = self.client.models.list().data
        self.assertEqual([m.id for m in listed], [server.model_id, "all", "qv"])
        for m in listed[1:]:
            self.assertEqual(m.model_extra["parent"], server.model_id)

    def test_each_adapter_gives_pefts_greedy_tokens(self):
        for model in ("all", "qv", server.model_id):
            with self.subTest(model=model):
                response = self.complete(model)
                self.assertEqual(response.model, model)
                self.assertEqual(response.choices[0].text, self.detokenized(want(model)))

    def test_streamed_answers_are_the_same(self):
        for model in ("qv", "all"):
            with self.subTest(model=model):
                text = "".join(c.choices[0].text for c in self.complete(model, stream=True) if c.choices)
                self.assertEqual(text, self.detokenized(want(model)))

    def test_requests_of_every_adapter_at_once(self):
        models = ["all", "qv", server.model_id] * 4
        answers = [None] * len(models)

        def run(i):
            with client_of(server.url) as client:
                answers[i] = client.completions.create(model=models[i], prompt=self.ids, max_tokens=12,
                                                       temperature=0, extra_body={"ignore_eos": True,
                                                                                  "skip_special_tokens": False})

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(models))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for model, answer in zip(models, answers):
            self.assertEqual(answer.choices[0].text, self.detokenized(want(model)), model)

    def test_an_unknown_model_is_a_404_naming_the_served_ones(self):
        with self.assertRaises(openai.NotFoundError) as raised:
            self.complete("ALL")
        self.assertIn("'all', 'qv'", str(raised.exception))


class Refusals(unittest.TestCase):
    def test_an_adapter_of_another_model_stops_the_start(self):
        result = subprocess.run([str(binary), "serve", "-m", str(fixtures / "hf" / "smollm_chat"), "--port", "0",
                                 "--lora", f"x={fixtures / 'lora' / 'gpt2'}"], capture_output=True, text=True,
                                timeout=60)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("is not an adaptable linear layer of this llama model", result.stderr)

    def test_a_bad_flag_names_the_form(self):
        result = subprocess.run([str(binary), "serve", "-m", str(fixtures / "hf" / "smollm_chat"), "--port", "0",
                                 "--lora", "no-directory"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("expected NAME=DIR", result.stderr)


if __name__ == "__main__":
    main(__file__)
