"""tokenmill.LLM.generate and friends on SmolLM2-135M-Instruct (GGUF Q4_1): the same tokens
as the CLI, batches, seeds, stops, logprobs, structured outputs, streaming and errors."""

import json

import numpy as np
import pytest

import tokenmill
from conftest import cli_json, settled

PROMPTS = ["The capital of France is", "Once upon a time, in a small village,", "def fibonacci(n):\n"]
GREEDY = tokenmill.SamplingParams(temperature=0, max_tokens=48, ignore_eos=True)


def test_greedy_generation_equals_the_clis(smollm2, smollm2_path):
    outputs = smollm2.generate(PROMPTS, GREEDY)
    assert [o.prompt for o in outputs] == PROMPTS
    for prompt, out in zip(PROMPTS, outputs):
        cli = cli_json("generate", "-m", smollm2_path, "--device", "cpu", "-p", prompt, "-n", "48",
                       "--ignore-eos", "--json")
        assert out.prompt_token_ids == cli["prompt_ids"]
        assert out.outputs[0].token_ids == cli["ids"], prompt
        assert out.outputs[0].text == cli["text"]
        assert out.outputs[0].finish_reason == "length"


def test_prompts_as_token_ids_and_dicts_give_the_same_completion(smollm2):
    ids = smollm2.get_tokenizer().encode(PROMPTS[0])
    by_text, by_ids, by_list, by_dict = (
        smollm2.generate(p, GREEDY)[0] for p in
        (PROMPTS[0], ids, [ids], {"prompt_token_ids": ids}))
    assert by_ids.prompt is None and by_ids.prompt_token_ids == ids
    for other in (by_ids, by_list, by_dict):
        assert other.outputs[0].token_ids == by_text.outputs[0].token_ids


def test_each_prompt_of_a_batch_gets_its_solo_completion(smollm2):
    batch = smollm2.generate(PROMPTS * 3, GREEDY)
    solo = [smollm2.generate(p, GREEDY)[0].outputs[0].token_ids for p in PROMPTS]
    assert [o.outputs[0].token_ids for o in batch] == solo * 3


def test_seeded_samples_repeat_and_n_gives_distinct_seeds(smollm2):
    params = tokenmill.SamplingParams(temperature=1.0, top_p=0.95, max_tokens=24, seed=7, n=3, ignore_eos=True)
    first = smollm2.generate(PROMPTS[2], params)[0]
    again = smollm2.generate(PROMPTS[2], params)[0]
    assert len(first.outputs) == 3 and [o.index for o in first.outputs] == [0, 1, 2]
    assert [o.token_ids for o in first.outputs] == [o.token_ids for o in again.outputs]
    assert len({tuple(o.token_ids) for o in first.outputs}) > 1
    # completion i of seed s is completion 0 of seed s + i
    one = tokenmill.SamplingParams(temperature=1.0, top_p=0.95, max_tokens=24, seed=8, ignore_eos=True)
    assert smollm2.generate(PROMPTS[2], one)[0].outputs[0].token_ids == first.outputs[1].token_ids


def test_stop_strings_stop_tokens_and_lengths_finish(smollm2):
    base = smollm2.generate(PROMPTS[0], GREEDY)[0].outputs[0]
    assert "United States" in base.text
    stopped = smollm2.generate(PROMPTS[0], tokenmill.SamplingParams(temperature=0, max_tokens=48,
                                                                    stop="United"))[0].outputs[0]
    assert stopped.finish_reason == "stop"
    assert stopped.text == base.text[:base.text.index("United")]
    stop_id = base.token_ids[3]
    by_token = smollm2.generate(PROMPTS[0], tokenmill.SamplingParams(
        temperature=0, max_tokens=48, stop_token_ids=[stop_id]))[0].outputs[0]
    assert by_token.finish_reason == "stop"
    assert by_token.token_ids == base.token_ids[:base.token_ids.index(stop_id) + 1]
    short = smollm2.generate(PROMPTS[0], tokenmill.SamplingParams(temperature=0, max_tokens=3))[0].outputs[0]
    assert short.finish_reason == "length" and short.token_ids == base.token_ids[:3]


def test_logprobs_are_the_log_softmax_of_the_logits(smollm2):
    params = tokenmill.SamplingParams(temperature=0, max_tokens=2, logprobs=5)
    out = smollm2.generate(PROMPTS[0], params)[0]
    completion = out.outputs[0]
    logits = smollm2.logits(out.prompt_token_ids + completion.token_ids[:1])
    assert logits.shape == (len(out.prompt_token_ids) + 1, smollm2.get_tokenizer().vocab_size)
    for step, row in zip(completion.logprobs, logits[-2:]):
        reference = row.astype(np.float64) - np.logaddexp.reduce(row.astype(np.float64))
        assert len(step) == 5
        for token, logprob in step.items():
            assert logprob.logprob == pytest.approx(reference[token], abs=1e-4)
        ranked = sorted(step.items(), key=lambda kv: kv[1].rank)
        assert [t for t, _ in ranked] == list(np.argsort(-reference, kind="stable")[:5])
    chosen = [step[t].logprob for step, t in zip(completion.logprobs, completion.token_ids)]
    assert completion.cumulative_logprob == pytest.approx(sum(chosen))


def test_logits_pick_the_greedy_token_and_dlpack_shares_them(smollm2):
    logits = smollm2.logits(PROMPTS[0])
    assert logits.dtype == np.float32 and logits.flags["C_CONTIGUOUS"]
    greedy = smollm2.generate(PROMPTS[0], tokenmill.SamplingParams(temperature=0, max_tokens=1))[0]
    assert int(logits[-1].argmax()) == greedy.outputs[0].token_ids[0]
    shared = np.from_dlpack(logits)  # a DLPack consumer gets the same memory
    assert shared.ctypes.data == logits.ctypes.data


def test_torch_takes_the_logits_without_a_copy(smollm2):
    torch = pytest.importorskip("torch")
    logits = smollm2.logits(PROMPTS[1])
    tensor = torch.from_dlpack(logits)
    assert tensor.data_ptr() == logits.ctypes.data and tuple(tensor.shape) == logits.shape


def test_structured_outputs_follow_the_schema_the_grammar_and_the_choice(smollm2):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    params = tokenmill.SamplingParams(temperature=0.7, seed=3, max_tokens=64,
                                      structured_outputs=tokenmill.StructuredOutputsParams(json=schema))
    out = smollm2.chat([{"role": "user", "content": "Give the largest city of Japan as JSON."}], params)[0]
    value = json.loads(out.outputs[0].text)
    jsonschema.validate(value, schema)
    assert list(value) == ["city", "population"]  # the schema's order
    choice = tokenmill.SamplingParams(temperature=1.0, seed=1, max_tokens=8,
                                      structured_outputs=tokenmill.StructuredOutputsParams(choice=["yes", "no"]))
    assert smollm2.generate("Is water wet? Answer:", choice)[0].outputs[0].text in ("yes", "no")
    digits = tokenmill.SamplingParams(temperature=1.0, seed=1, max_tokens=8, structured_outputs=(
        tokenmill.StructuredOutputsParams(grammar='root ::= [0-9] [0-9] [0-9]')))
    text = smollm2.generate("A number:", digits)[0].outputs[0].text
    assert len(text) == 3 and text.isdigit()
    with pytest.raises(ValueError, match="exactly one"):
        tokenmill.StructuredOutputsParams(json=schema, json_object=True).gbnf()


def test_a_stream_adds_up_to_the_generated_completion(smollm2):
    params = tokenmill.SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
    chunks = list(smollm2.stream(PROMPTS[1], params))
    whole = smollm2.generate(PROMPTS[1], params)[0].outputs[0]
    assert [c.finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1].finish_reason == "length"
    assert sum((c.token_ids for c in chunks), []) == whole.token_ids
    assert "".join(c.text for c in chunks) == whole.text


def test_leaving_a_stream_early_cancels_it(smollm2):
    stream = smollm2.stream(PROMPTS[1], tokenmill.SamplingParams(temperature=0, max_tokens=4000, ignore_eos=True))
    next(stream)
    stream.close()
    assert settled(smollm2)["running"] == 0


def test_chat_renders_the_template_and_answers(smollm2):
    messages = [{"role": "user", "content": "What is the boiling point of water?"}]
    out = smollm2.chat(messages, tokenmill.SamplingParams(temperature=0, max_tokens=100))[0]
    tokenizer = smollm2.get_tokenizer()
    assert out.prompt == tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert out.prompt.endswith("<|im_start|>assistant\n")
    assert out.outputs[0].finish_reason == "stop"  # at <|im_end|>
    assert "100" in out.outputs[0].text
    batch = smollm2.chat([messages, messages], tokenmill.SamplingParams(temperature=0, max_tokens=100))
    assert [o.outputs[0].token_ids for o in batch] == [out.outputs[0].token_ids] * 2


def test_bad_requests_raise_the_engines_message(smollm2):
    with pytest.raises(tokenmill.TokenmillError, match="top-p"):
        smollm2.generate("x", tokenmill.SamplingParams(top_p=2.0))
    with pytest.raises(tokenmill.TokenmillError, match="no such adapter"):
        smollm2.generate("x", lora="nope")
    with pytest.raises(tokenmill.TokenmillError, match="outside the vocabulary"):
        smollm2.generate([[1, 10 ** 6]])
    with pytest.raises(tokenmill.TokenmillError, match="context"):
        smollm2.generate([[1] * (smollm2.context_length + 1)])
    with pytest.raises(ValueError, match="one per prompt"):
        smollm2.generate(PROMPTS, [GREEDY, GREEDY])
    with pytest.raises(TypeError):
        smollm2.generate([3.5])
    # a request refused in a batch leaves nothing running
    with pytest.raises(tokenmill.TokenmillError):
        smollm2.generate([PROMPTS[0], [10 ** 6]], GREEDY)
    assert settled(smollm2)["running"] == 0
    assert smollm2.generate(PROMPTS[0], GREEDY)[0].outputs[0].finish_reason == "length"


def test_a_closed_llm_says_so(smollm2_path):
    llm = tokenmill.LLM(smollm2_path, device="cpu", context=1024, kv_cache_memory=64 << 20)
    with llm:
        assert llm.generate("Hi", tokenmill.SamplingParams(max_tokens=2))[0].outputs[0].token_ids
    with pytest.raises(tokenmill.TokenmillError, match="closed"):
        llm.generate("Hi")


def test_a_missing_model_raises_with_its_path():
    with pytest.raises(tokenmill.TokenmillError, match="no-such-model"):
        tokenmill.LLM("/no-such-model.gguf", device="cpu")
