"""Tool calling through the official `openai` client: `tools` with each `tool_choice`,
streamed and not, and tool results in the history.

    python3 tests/serve/tool_calling_test.py BUILD/tokenmill tests/fixtures [unittest args]

One server on tests/fixtures/hf/smollm_chat (random weights) with a short Hermes-style chat
template (tests/serve/hermes_tools.jinja, --chat-template). tool_choice "required" and a
named function are enforced by a grammar, so even this model calls tools: every call names
one of the tools, its arguments are JSON that validates (jsonschema) against the function's
parameters, finish_reason is "tool_calls", and a stream's deltas add up to the same calls.
"none" never returns calls; "auto" answers (text or calls); a conversation with tool calls
and tool results renders; bad tools are 400s naming the field.
"""

import json
import pathlib
import sys
import unittest

import jsonschema
import openai

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_process import assert_bad_requests, main, serve  # noqa: E402

SEEDS = [1, 2, 3]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}},
           "required": ["city", "unit"], "additionalProperties": False}
ADD = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
       "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather now", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "add", "parameters": ADD}}]
SCHEMAS = {"get_weather": WEATHER, "add": ADD}

server = None
_server_context = None


def setUpModule():
    global server, _server_context
    binary, fixtures = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    template = pathlib.Path(__file__).resolve().parent / "hermes_tools.jinja"
    _server_context = serve(binary, fixtures / "hf" / "smollm_chat", "--chat-template", template, threads=2)
    server = _server_context.__enter__()


def tearDownModule():
    _server_context.__exit__(None, None, None)


class ToolCalling(unittest.TestCase):
    def setUp(self):
        self.client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)
        self.addCleanup(self.client.close)

    def chat(self, **kwargs):
        args = {"model": server.model_id, "messages": MESSAGES, "tools": TOOLS, "max_tokens": 120,
                "temperature": 1.0}
        args.update(kwargs)
        return self.client.chat.completions.create(**args)

    def assert_valid_calls(self, calls, names):
        self.assertTrue(calls)
        for call in calls:
            self.assertEqual(call.type, "function")
            self.assertIn(call.function.name, names)
            self.assertTrue(call.id)
            jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])

    def test_required_calls_a_tool_with_valid_arguments(self):
        for seed in SEEDS:
            with self.subTest(seed=seed):
                choice = self.chat(tool_choice="required", parallel_tool_calls=False, seed=seed).choices[0]
                self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
                self.assertIsNone(choice.message.content)
                self.assertEqual(len(choice.message.tool_calls), 1)
                self.assert_valid_calls(choice.message.tool_calls, {"get_weather", "add"})
                # In parallel the model may go on calling until max_tokens: the whole calls still validate.
                parallel = self.chat(tool_choice="required", seed=seed, max_tokens=150).choices[0]
                self.assertIn(parallel.finish_reason, ("tool_calls", "length"))
                self.assert_valid_calls(parallel.message.tool_calls, {"get_weather", "add"})

    def test_a_named_function_is_the_one_called(self):
        for seed in SEEDS:
            choice = self.chat(tool_choice={"type": "function", "function": {"name": "add"}}, seed=seed).choices[0]
            self.assertEqual(choice.finish_reason, "tool_calls")
            self.assertEqual(len(choice.message.tool_calls), 1)
            self.assert_valid_calls(choice.message.tool_calls, {"add"})

    def test_streamed_calls_equal_the_whole_ones(self):
        whole = self.chat(tool_choice="required", seed=7, max_tokens=150).choices[0]
        calls, finish, content = {}, None, ""
        for chunk in self.chat(tool_choice="required", seed=7, max_tokens=150, stream=True):
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                content += choice.delta.content or ""
                for delta in choice.delta.tool_calls or []:
                    call = calls.setdefault(delta.index, {"name": "", "arguments": ""})
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
        self.assertEqual(finish, whole.finish_reason)
        self.assertEqual(content, whole.message.content or "")
        self.assertEqual([calls[i] for i in sorted(calls)],
                         [{"name": c.function.name, "arguments": c.function.arguments}
                          for c in whole.message.tool_calls])

    def test_none_and_auto(self):
        for seed in SEEDS:
            none = self.chat(tool_choice="none", seed=seed).choices[0]
            self.assertFalse(none.message.tool_calls)
            self.assertNotEqual(none.finish_reason, "tool_calls")
            auto = self.chat(seed=seed).choices[0]
            if auto.message.tool_calls:
                self.assert_valid_calls(auto.message.tool_calls, {"get_weather", "add"})
            else:
                self.assertIsInstance(auto.message.content, str)

    def test_tool_results_in_the_history(self):
        history = MESSAGES + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                                  "arguments": '{"city": "Paris", "unit": "c"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"},
        ]
        with_results = self.chat(messages=history, tool_choice="none", max_tokens=5, seed=1)
        without = self.chat(tool_choice="none", max_tokens=5, seed=1)
        self.assertGreater(with_results.usage.prompt_tokens, without.usage.prompt_tokens)

    def test_bad_tools_name_the_field(self):
        cases = [
            ({"tools": [{"type": "function", "function": {"name": "has space"}}]}, "tools[0].function.name"),
            ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
            ({"tools": TOOLS + TOOLS[:1]}, "tools[2].function.name"),
            ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string",
                                                                                     "multipleOf": 2}}}]},
             "tools[0].function.parameters"),
            ({"tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
        ]
        assert_bad_requests(self, self.chat, cases, openai.BadRequestError)


if __name__ == "__main__":
    main("tool_calling_test.py")
