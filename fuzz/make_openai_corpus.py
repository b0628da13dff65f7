#!/usr/bin/env python3
"""Writes fuzz/corpus/openai (seed request bodies, first byte = endpoint: 0 completions,
1 chat, 2 tokenize, 3 detokenize, 4 embeddings) and fuzz/openai.dict (JSON keys and awkward values).
Run from the repository root."""
import json
seeds = [
 (0, {"model": "smollm", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "n": 2, "stop": ["\n", "end"], "logprobs": 3, "seed": 7}),
 (0, {"prompt": [[1, 2, 3], [4, 5]], "max_tokens": 1000, "stream": True, "stream_options": {"include_usage": True}}),
 (0, {"prompt": ["a", "b"], "top_k": 40, "min_p": 0.1, "repetition_penalty": 1.1, "frequency_penalty": 0.5, "presence_penalty": -0.5, "ignore_eos": True, "stop_token_ids": [2]}),
 (1, {"model": "smollm", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_completion_tokens": 16, "logprobs": True, "top_logprobs": 2}),
 (1, {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]}, {"role": "assistant", "content": "Hi"}, {"role": "user", "content": "<|im_start|>"}], "stream": True, "n": 3}),
 (2, {"prompt": "Hello <|im_end|> world", "add_special_tokens": True}),
 (2, {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": False}),
 (3, {"tokens": [1, 2, 3, 100, 49151]}),
 (4, {"model": "smollm", "input": ["Hello", "world"], "encoding_format": "base64", "dimensions": 32}),
 (4, {"input": [[1, 2, 3], [4]], "encoding_format": "float", "user": "u"}),
]
for i, (endpoint, body) in enumerate(seeds):
    with open(f"fuzz/corpus/openai/seed{i}", "wb") as f:
        f.write(bytes([endpoint]) + json.dumps(body).encode())
keys = ["model","prompt","messages","role","content","type","text","max_tokens","max_completion_tokens","temperature","top_p","top_k","min_p","n","stream","stream_options","include_usage","stop","seed","logprobs","top_logprobs","frequency_penalty","presence_penalty","repetition_penalty","ignore_eos","stop_token_ids","skip_special_tokens","add_special_tokens","add_generation_prompt","tokens","echo","best_of","suffix","logit_bias","tools","response_format","system","user","assistant","developer","tool","input","encoding_format","dimensions","base64","float"]
words = ['"%s"' % k for k in keys] + ["true", "false", "null", "1e308", "-1", "0.5", "9223372036854775808", r'"\ud800"']
with open("fuzz/openai.dict", "w") as f:
    for w in words:
        f.write('"' + w.replace("\\", "\\\\").replace('"', '\\"') + '"\n')
