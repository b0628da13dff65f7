"""LLM: offline batched generation through tokenmill's continuous-batching engine, shaped as
vLLM's offline API (vllm.LLM)."""

from __future__ import annotations

import itertools
import random
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import _native
from .outputs import CompletionOutput, Logprob, RequestOutput, StreamChunk
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer

# A prompt: text, token ids, or vLLM's {"prompt": text} / {"prompt_token_ids": ids}.
Prompt = Union[str, Sequence[int], Mapping[str, Any]]


class LLM:
    """A model loaded for generation, with the engine that serves it running in the background.

    model: a Hugging Face model directory or a GGUF file.
    device: "auto" (a GPU when one can run the model, else the CPU), "cpu", "cuda" or "cuda:N".
    threads: CPU threads, process-wide, for every LLM (None: leave the count as it is; at
        first every core, fewer while other processes keep some busy).
    lora: {name: PEFT adapter directory}: adapters a call may run with (``lora=name``); calls
        of every adapter and of the base model share the engine's steps.
    chat_template: a Jinja chat template file to use instead of the tokenizer's.
    The other options are the engine's, as ``tokenmill serve`` takes them: context,
    kv_cache_memory (bytes) or kv_cache_fraction (of the device's free memory), block_size,
    max_batch_tokens, max_prefill_with_decodes, max_running, max_waiting, prefix_caching,
    speculative ("ngram[:N]" or "draft:MODEL[:N]"), speculative_rows, no_mmap.

    Calls may come from several Python threads at once: the engine batches them together.
    Errors of the engine raise tokenmill.TokenmillError with its message.
    """

    def __init__(self, model: str, device: str = "auto", threads: Optional[int] = None, *,
                 lora: Optional[Mapping[str, str]] = None, chat_template: Optional[str] = None,
                 context: int = 0, kv_cache_memory: int = 0, kv_cache_fraction: float = 0.2,
                 block_size: int = 16, max_batch_tokens: int = 512, max_prefill_with_decodes: int = 64,
                 max_running: int = 64, max_waiting: int = 1024, prefix_caching: bool = True,
                 speculative: Optional[str] = None, speculative_rows: int = 4, no_mmap: bool = False,
                 verbose: bool = False):
        if threads is not None:
            if not isinstance(threads, int) or threads < 1:
                raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
            _native.set_threads(threads)
        self._engine = _native.Engine(
            str(model), device=device, lora={str(k): str(v) for k, v in (lora or {}).items()},
            chat_template=str(chat_template or ""), context=context, kv_cache_memory=kv_cache_memory,
            kv_cache_fraction=kv_cache_fraction, block_size=block_size, max_batch_tokens=max_batch_tokens,
            max_prefill_with_decodes=max_prefill_with_decodes, max_running=max_running,
            max_waiting=max_waiting, prefix_caching=prefix_caching, speculative=speculative or "",
            speculative_rows=speculative_rows, no_mmap=no_mmap, log=print if verbose else None)
        native_tokenizer = self._engine.tokenizer
        self._tokenizer = (Tokenizer._wrap(native_tokenizer, self._engine.chat_template)
                           if native_tokenizer is not None else None)
        self._ids = itertools.count()

    # ------------------------------------------------------------------ properties

    @property
    def device(self) -> str:
        """The backend the model runs on ("cpu", "cuda:0", ...)."""
        return self._engine.backend_name

    @property
    def context_length(self) -> int:
        """The longest sequence, prompt and completion together."""
        return self._engine.context

    @property
    def lora_adapters(self) -> List[str]:
        return list(self._engine.adapter_names)

    def get_tokenizer(self) -> Optional[Tokenizer]:
        """The model's tokenizer; None for a model without one (it takes and gives token ids)."""
        return self._tokenizer

    def stats(self) -> Dict[str, int]:
        """The engine's counters: running, waiting, KV blocks, prefix-cache hits, tokens, steps."""
        return self._engine.stats()

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: Union[Prompt, Sequence[Prompt]],
                 sampling_params: Optional[Union[SamplingParams, Sequence[SamplingParams]]] = None, *,
                 lora: Optional[Union[str, Sequence[Optional[str]]]] = None,
                 use_tqdm: bool = False) -> List[RequestOutput]:
        """Completes every prompt (all of them batched by the engine) and returns one
        RequestOutput per prompt, in order. sampling_params and lora may be one for all prompts
        or a list with one per prompt. Ctrl-C cancels what is still running and raises
        KeyboardInterrupt; the LLM stays usable."""
        del use_tqdm  # accepted for vLLM's signature; there is no progress bar
        prompt_list = _prompt_list(prompts)
        texts, ids = zip(*(self._prompt_ids(p) for p in prompt_list)) if prompt_list else ((), ())
        params = _per_prompt(sampling_params if sampling_params is not None else SamplingParams(),
                             len(prompt_list), "sampling_params", SamplingParams)
        adapters = _per_prompt(lora, len(prompt_list), "lora", str)
        requests, owners = [], []
        native_of = {}
        for i, (p, adapter) in enumerate(zip(params, adapters)):
            if id(p) not in native_of:
                native_of[id(p)] = p._request()
            for seed in _seeds(p):
                r = native_of[id(p)].copy()
                r.prompt = list(ids[i])
                r.seed = seed
                r.adapter = adapter or ""
                requests.append(r)
                owners.append(i)
        results = self._engine.generate(requests)
        outputs = [RequestOutput(request_id=str(next(self._ids)), prompt=texts[i], prompt_token_ids=list(ids[i]),
                                 outputs=[]) for i in range(len(prompt_list))]
        for owner, result in zip(owners, results):
            out = outputs[owner]
            out.num_cached_tokens = max(out.num_cached_tokens, result.cached_tokens)
            out.outputs.append(self._completion(len(out.outputs), result))
        return outputs

    def chat(self, messages: Union[Sequence[Mapping[str, Any]], Sequence[Sequence[Mapping[str, Any]]]],
             sampling_params: Optional[Union[SamplingParams, Sequence[SamplingParams]]] = None, *,
             lora: Optional[Union[str, Sequence[Optional[str]]]] = None, chat_template: Optional[str] = None,
             add_generation_prompt: bool = True, tools: Optional[List[Mapping[str, Any]]] = None,
             chat_template_kwargs: Optional[Mapping[str, Any]] = None,
             use_tqdm: bool = False) -> List[RequestOutput]:
        """Answers a conversation (a list of {"role", "content", ...} messages) or a list of
        conversations, rendered with the model's chat template (or `chat_template`, Jinja
        source), tools and extra template variables passed to it as transformers passes them."""
        del use_tqdm
        conversations = [messages] if messages and isinstance(messages[0], Mapping) else list(messages)
        tokenizer = self._require_tokenizer("chat()")
        prompts = []
        for conversation in conversations:
            text = tokenizer.apply_chat_template(
                conversation, tools=tools, add_generation_prompt=add_generation_prompt, tokenize=False,
                chat_template=chat_template, **dict(chat_template_kwargs or {}))
            prompts.append({"prompt": text, "prompt_token_ids": tokenizer.encode(text, add_special_tokens=False)})
        return self.generate(prompts, sampling_params, lora=lora)

    def stream(self, prompt: Prompt, sampling_params: Optional[SamplingParams] = None, *,
               lora: Optional[str] = None) -> Iterator[StreamChunk]:
        """Generates one completion, yielding the text and tokens of each step as they come.
        Leaving the loop early (break, an exception, Ctrl-C) cancels the generation."""
        params = sampling_params if sampling_params is not None else SamplingParams()
        if params.n != 1:
            raise ValueError("stream() generates one completion: SamplingParams.n must be 1")
        r = params._request()
        r.prompt = list(self._prompt_ids(prompt)[1])
        r.seed = _seeds(params)[0]
        r.adapter = lora or ""
        native = self._engine.submit(r)
        try:
            for event in native:
                yield StreamChunk(text=event.text, token_ids=list(event.token_ids),
                                  finish_reason=_finish_reason(event.finish_reason),
                                  logprobs=self._logprobs(event.logprobs) if r.logprobs >= 0 else None)
        finally:
            native.cancel()

    def logits(self, prompt: Prompt):
        """The model's logits at every position of the prompt: a float32 NumPy array
        [tokens, vocab] (torch.from_dlpack takes it without a copy)."""
        return self._engine.logits(list(self._prompt_ids(prompt)[1]))

    def close(self) -> None:
        """Stops the engine (what is in flight ends); the LLM cannot generate afterwards."""
        self._engine.close()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def _require_tokenizer(self, what: str) -> Tokenizer:
        if self._tokenizer is None:
            raise ValueError(f"{what} needs the model's tokenizer, and this model has none: give token ids")
        return self._tokenizer

    def _prompt_ids(self, prompt: Prompt):
        """(text or None, token ids) of a prompt."""
        if isinstance(prompt, str):
            return prompt, self._require_tokenizer("a text prompt").encode(prompt)
        if isinstance(prompt, Mapping):
            if "prompt_token_ids" in prompt:
                return prompt.get("prompt"), list(prompt["prompt_token_ids"])
            if "prompt" in prompt:
                return prompt["prompt"], self._require_tokenizer("a text prompt").encode(prompt["prompt"])
            raise ValueError("a prompt dict needs 'prompt' (text) or 'prompt_token_ids'")
        if isinstance(prompt, Sequence) and all(isinstance(t, int) for t in prompt):
            return None, list(prompt)
        raise TypeError(f"a prompt is text, a list of token ids or a dict, not {type(prompt).__name__}")

    def _completion(self, index: int, result: "_native.Result") -> CompletionOutput:
        logprobs = self._logprobs(result.logprobs) if result.has_logprobs else None
        cumulative = (sum(step[result.token_ids[k]].logprob for k, step in enumerate(logprobs))
                      if logprobs is not None else None)
        return CompletionOutput(index=index, text=result.text, token_ids=list(result.token_ids),
                                finish_reason=_finish_reason(result.finish_reason), logprobs=logprobs,
                                cumulative_logprob=cumulative)

    def _logprobs(self, native: List[Any]) -> List[Dict[int, Logprob]]:
        decode = self._tokenizer.decode_token if self._tokenizer is not None else (lambda _: None)
        steps = []
        for token, logprob, top in native:
            step = {t: Logprob(lp, rank + 1, decode(t)) for rank, (t, lp) in enumerate(top)}
            if token not in step:
                step[token] = Logprob(logprob, None, decode(token))
            steps.append(step)
        return steps


def _finish_reason(engine_reason: str) -> Optional[str]:
    """vLLM's name: "stop", "length", "abort" (cancelled, past its deadline, engine stopped),
    "error"; None while the completion goes on."""
    if not engine_reason:
        return None
    return "abort" if engine_reason in ("cancelled", "timeout", "shutdown") else engine_reason


def _prompt_list(prompts: Union[Prompt, Sequence[Prompt]]) -> List[Prompt]:
    if isinstance(prompts, (str, Mapping)):
        return [prompts]
    prompts = list(prompts)
    if prompts and all(isinstance(t, int) for t in prompts):
        return [prompts]  # one prompt of token ids
    return prompts


def _per_prompt(value: Any, count: int, name: str, kind: type) -> List[Any]:
    if value is None or isinstance(value, kind):
        return [value] * count
    values = list(value)
    if len(values) != count:
        raise ValueError(f"{name}: {len(values)} given for {count} prompts (give one, or one per prompt)")
    return values


def _seeds(params: SamplingParams) -> List[int]:
    """One seed per completion: seed, seed + 1, ... or random ones."""
    if params.seed is None:
        return [random.getrandbits(64) for _ in range(params.n)]
    return [(params.seed + i) % (1 << 64) for i in range(params.n)]
