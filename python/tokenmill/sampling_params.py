"""What to generate: vLLM's SamplingParams and StructuredOutputsParams, as tokenmill takes them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

from . import _native


@dataclass
class StructuredOutputsParams:
    """The grammar the generated text must follow; give one of the fields.

    json: a JSON Schema (a dict, or its JSON text): the text is JSON valid against it, its
        properties in the schema's order.
    json_object: any JSON object.
    grammar: a GBNF grammar (llama.cpp's format), from rule ``root``.
    choice: the text is exactly one of these strings.
    """

    json: Optional[Union[dict, str]] = None
    json_object: bool = False
    grammar: Optional[str] = None
    choice: Optional[Sequence[str]] = None

    def gbnf(self) -> str:
        """The grammar as GBNF text (raises ValueError unless exactly one field is given)."""
        given = [name for name, set_ in (("json", self.json is not None), ("json_object", self.json_object),
                                          ("grammar", self.grammar is not None),
                                          ("choice", self.choice is not None)) if set_]
        if len(given) != 1:
            raise ValueError("StructuredOutputsParams: give exactly one of json, json_object, grammar, choice "
                             f"(given: {', '.join(given) or 'none'})")
        if self.json is not None:
            schema = self.json if isinstance(self.json, str) else json.dumps(self.json)
            return _native.json_schema_to_gbnf(schema)
        if self.json_object:
            return _native.json_object_gbnf()
        if self.grammar is not None:
            if not isinstance(self.grammar, str) or not self.grammar:
                raise ValueError("StructuredOutputsParams.grammar: expected GBNF text (a non-empty string)")
            return self.grammar
        choices = list(self.choice or [])
        if not choices or not all(isinstance(c, str) and c for c in choices):
            raise ValueError("StructuredOutputsParams.choice: expected a list of non-empty strings")
        return "root ::= " + " | ".join(_gbnf_literal(c) for c in choices)


def _gbnf_literal(text: str) -> str:
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return '"' + "".join(escapes.get(c, c) for c in text) + '"'


@dataclass
class SamplingParams:
    """How each completion is sampled, with vLLM's names and defaults.

    n: completions per prompt (seeds seed, seed + 1, ... when a seed is given).
    temperature: 0 is greedy; top_k 0 or -1, top_p 1 and min_p 0 are off.
    repetition_penalty (transformers'), frequency_penalty and presence_penalty (OpenAI's).
    seed: the sampler's seed (None: a random one); the same seed gives the same tokens.
    stop: strings that end the completion (left out of its text); stop_token_ids: token ids
        that end it (kept), besides the model's end-of-sequence ids unless ignore_eos.
    max_tokens: tokens to generate at most (cut to what the context leaves).
    logprobs: None, or the number of alternatives (0 to 20) reported with each token's
        log-probability.
    skip_special_tokens: leave special tokens out of the text.
    structured_outputs: the grammar the text must follow.
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: Optional[int] = None
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: Optional[List[int]] = None
    ignore_eos: bool = False
    max_tokens: Optional[int] = 16
    logprobs: Optional[int] = None
    skip_special_tokens: bool = True
    structured_outputs: Optional[StructuredOutputsParams] = None

    def _request(self) -> "_native.Request":
        """The engine request these parameters make (without prompt, seed and adapter)."""
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"SamplingParams.n must be a positive integer, got {self.n!r}")
        r = _native.Request()
        r.max_tokens = 1 << 30 if self.max_tokens is None else self.max_tokens
        r.temperature = self.temperature
        r.top_p = self.top_p
        r.top_k = 0 if self.top_k == -1 else self.top_k
        r.min_p = self.min_p
        r.repetition_penalty = self.repetition_penalty
        r.frequency_penalty = self.frequency_penalty
        r.presence_penalty = self.presence_penalty
        r.stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        r.stop_token_ids = list(self.stop_token_ids or [])
        r.ignore_eos = self.ignore_eos
        r.logprobs = -1 if self.logprobs is None else self.logprobs
        r.skip_special_tokens = self.skip_special_tokens
        r.grammar = self.structured_outputs.gbnf() if self.structured_outputs is not None else ""
        return r
