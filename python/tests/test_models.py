"""The Hugging Face fixture models through Python: logits as transformers computed them, greedy
ids as the CLI generates them, and PEFT adapters served as LoRA."""

import json

import numpy as np
import pytest

import tokenmill
from conftest import FIXTURES, cli_json

# The float32 checkpoints: their logits match transformers' to 1e-4 of the largest (f32 math,
# f32 KV cache), as the C++ parity test holds them.
F32_MODELS = ["gemma2", "gpt2", "llama", "mistral", "mixtral", "olmo2", "phi3", "qwen3", "smollm_chat"]


@pytest.mark.parametrize("name", F32_MODELS)
def test_logits_and_greedy_ids_as_transformers_and_the_cli(name):
    directory = FIXTURES / "hf" / name
    expected = json.loads((directory / "expected.json").read_text())
    llm = tokenmill.LLM(str(directory), device="cpu", kv_cache_memory=32 << 20, context=64)
    try:
        for prompt, reference in zip(expected["prompts"], expected["logits"]):
            got = llm.logits(prompt)
            want = np.array(reference, dtype=np.float64)
            assert got.shape == want.shape
            assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), name
        for case in expected["greedy"]:
            params = tokenmill.SamplingParams(temperature=0, max_tokens=len(case["ids"]), ignore_eos=True)
            ids = llm.generate(case["prompt"], params)[0].outputs[0].token_ids
            assert ids == case["ids"], name
            cli = cli_json("generate", "-m", str(directory), "--device", "cpu", "--prompt-ids",
                           ",".join(map(str, case["prompt"])), "-n", str(len(case["ids"])), "--ignore-eos", "--json")
            assert ids == cli["ids"], name
    finally:
        llm.close()


def lora_expectations(name):
    expected = json.loads((FIXTURES / "lora" / name / "expected.json").read_text())
    return {k: json.loads(v) if isinstance(v, str) else v for k, v in expected.items()
            if k in ("ids", "greedy", "base_greedy", "logits")}


def test_peft_adapters_give_pefts_greedy_tokens_beside_the_base_model():
    adapters = {"all": str(FIXTURES / "lora" / "smollm_chat"), "qv": str(FIXTURES / "lora" / "smollm_chat_qv")}
    llm = tokenmill.LLM(str(FIXTURES / "hf" / "smollm_chat"), device="cpu", lora=adapters)
    assert llm.lora_adapters == ["all", "qv"]
    all_, qv = lora_expectations("smollm_chat"), lora_expectations("smollm_chat_qv")
    params = tokenmill.SamplingParams(temperature=0, max_tokens=len(all_["greedy"]), ignore_eos=True)
    outs = llm.generate([all_["ids"], qv["ids"], all_["ids"]], params, lora=["all", "qv", None])
    assert outs[0].outputs[0].token_ids == all_["greedy"]
    assert outs[1].outputs[0].token_ids == qv["greedy"]
    assert outs[2].outputs[0].token_ids == all_["base_greedy"]
    streamed = sum((c.token_ids for c in llm.stream(all_["ids"], params, lora="qv")), [])
    assert streamed == (qv["greedy"] if qv["ids"] == all_["ids"] else streamed)
    with pytest.raises(tokenmill.TokenmillError, match="no such adapter"):
        llm.generate(all_["ids"], params, lora="none-such")
    llm.close()
