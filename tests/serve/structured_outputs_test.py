"""Structured outputs through the official `openai` client: `response_format` json_schema and
json_object, and the `grammar` extension (GBNF), on a model that cannot write JSON by itself.

    python3 tests/serve/structured_outputs_test.py BUILD/tokenmill tests/fixtures [unittest args]

One server on tests/fixtures/hf/smollm_chat (random weights: left alone it writes noise; the
real SmolLM2 tokenizer, 49152 tokens). Sampled at temperature 1 with several seeds and n = 3,
every answer to every schema must finish with "stop" and validate against its schema
(jsonschema, the reference validator), streamed or not; json_object answers parse as JSON
objects; a GBNF grammar's answers match it; unsupported schemas and broken grammars are 400s
naming the field.
"""

import json
import pathlib
import re
import sys
import unittest

import jsonschema
import openai

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_process import assert_bad_requests, main, serve  # noqa: E402

SEEDS = [1, 2, 3, 4]
MESSAGES = [{"role": "user", "content": "Describe a person as JSON."}]

# Each schema bounds its strings and arrays, so that a random model ends within max_tokens.
NAME = {"type": "string", "maxLength": 12}
SCHEMAS = {
    "flat object, required, no additional properties": {
        "type": "object",
        "properties": {"name": NAME, "age": {"type": "integer"}, "height": {"type": "number"},
                       "member": {"type": "boolean"}},
        "required": ["name", "age", "height", "member"],
        "additionalProperties": False,
    },
    "optional properties": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": NAME, "c": {"type": "null"}},
        "required": ["b"],
        "additionalProperties": False,
    },
    "enums and arrays with bounds": {
        "type": "object",
        "properties": {
            "colour": {"enum": ["red", "green", "blue"]},
            "scores": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
            "tags": {"type": "array", "items": {"enum": ["x", "y", 3, None, True]}, "maxItems": 3},
        },
        "required": ["colour", "scores", "tags"],
        "additionalProperties": False,
    },
    "nested objects and anyOf": {
        "type": "object",
        "properties": {
            "owner": {"type": "object", "properties": {"first": NAME, "last": NAME},
                      "required": ["first", "last"], "additionalProperties": False},
            "id": {"anyOf": [{"type": "integer"}, NAME, {"type": "boolean"}]},
        },
        "required": ["owner", "id"],
        "additionalProperties": False,
    },
    "$ref to $defs": {
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                            "required": ["x", "y"], "additionalProperties": False}},
        "type": "object",
        "properties": {"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}},
        "required": ["start", "end"],
        "additionalProperties": False,
    },
    "a top-level array": {"type": "array", "items": NAME, "minItems": 1, "maxItems": 3},
}

server = None
_server_context = None


def setUpModule():
    global server, _server_context
    binary, fixtures = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    _server_context = serve(binary, fixtures / "hf" / "smollm_chat", threads=2)
    server = _server_context.__enter__()


def tearDownModule():
    _server_context.__exit__(None, None, None)


def json_schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}


class StructuredOutputs(unittest.TestCase):
    def setUp(self):
        self.client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)
        self.addCleanup(self.client.close)

    def chat(self, **kwargs):
        args = {"model": server.model_id, "messages": MESSAGES, "max_tokens": 160, "temperature": 1.0}
        args.update(kwargs)
        return self.client.chat.completions.create(**args)

    def test_every_answer_validates_against_its_schema(self):
        for name, schema in SCHEMAS.items():
            for seed in SEEDS:
                with self.subTest(schema=name, seed=seed):
                    response = self.chat(response_format=json_schema_format(schema), seed=seed, n=3)
                    for choice in response.choices:
                        self.assertEqual(choice.finish_reason, "stop", choice.message.content)
                        jsonschema.validate(json.loads(choice.message.content), schema)

    def test_properties_come_in_the_schemas_order(self):
        schema = SCHEMAS["flat object, required, no additional properties"]
        answer = json.loads(self.chat(response_format=json_schema_format(schema), seed=9).choices[0].message.content)
        self.assertEqual(list(answer), ["name", "age", "height", "member"])

    def test_streamed_answers_equal_the_whole_ones(self):
        schema = SCHEMAS["nested objects and anyOf"]
        whole = self.chat(response_format=json_schema_format(schema), seed=5).choices[0]
        stream = self.chat(response_format=json_schema_format(schema), seed=5, stream=True)
        text, finish = "", None
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
        self.assertEqual((text, finish), (whole.message.content, "stop"))

    def test_json_object_answers_are_objects(self):
        for seed in SEEDS:
            response = self.chat(response_format={"type": "json_object"}, seed=seed, max_tokens=170)
            content = response.choices[0].message.content
            if response.choices[0].finish_reason == "stop":  # an open-ended object may not end in time
                self.assertIsInstance(json.loads(content), dict)
            else:
                self.assertTrue(content.startswith("{"), content)

    def test_gbnf_grammar(self):
        grammar = r'root ::= ("yes" | "no") ", " [0-9]{2,3} (" " [a-z]{1,5})?'
        for seed in SEEDS:
            response = self.client.completions.create(model=server.model_id, prompt="Answer:", max_tokens=40,
                                                      seed=seed, extra_body={"grammar": grammar})
            choice = response.choices[0]
            self.assertRegex(choice.text, re.compile(r"^(yes|no), [0-9]{2,3}( [a-z]{1,5})?$"))

    def test_bad_requests_name_the_field(self):
        cases = [
            ({"response_format": json_schema_format({"type": "integer", "multipleOf": 3})},
             "response_format.json_schema.schema"),
            ({"response_format": {"type": "yaml"}}, "response_format.type"),
            ({"extra_body": {"grammar": "root ::= missing"}}, "grammar"),
            ({"response_format": {"type": "json_object"}, "extra_body": {"grammar": "root ::= \"a\""}}, "grammar"),
        ]
        assert_bad_requests(self, self.chat, cases, openai.BadRequestError)


if __name__ == "__main__":
    main("structured_outputs_test.py")
