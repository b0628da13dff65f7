"""What generation returns, shaped as vLLM's RequestOutput and CompletionOutput."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional


@dataclass
class Logprob:
    """A token's log-probability under the model (before penalties and temperature), its rank
    among the vocabulary (1: the most likely) when known, and its text."""

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclass
class CompletionOutput:
    """One completion of a prompt.

    finish_reason: "stop" (an end-of-sequence token, a stop token or a stop string), "length"
    (max_tokens or the context), "abort" (cancelled, or the LLM closed) or "error".
    logprobs: with SamplingParams.logprobs, one dict per generated token mapping the chosen
    token and the most likely alternatives to their Logprob.
    """

    index: int
    text: str
    token_ids: List[int]
    finish_reason: str
    logprobs: Optional[List[Dict[int, Logprob]]] = None
    cumulative_logprob: Optional[float] = None


@dataclass
class RequestOutput:
    """A prompt and its completions (SamplingParams.n of them)."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool = True
    num_cached_tokens: int = 0  # prompt tokens whose KV came from the prefix cache


@dataclass
class StreamChunk:
    """What one step of a streamed generation added: new text and tokens (text may be empty
    while a character's bytes are incomplete); the last chunk has finish_reason."""

    text: str
    token_ids: List[int]
    finish_reason: Optional[str] = None
    logprobs: Optional[List[Dict[int, Logprob]]] = field(default=None)
