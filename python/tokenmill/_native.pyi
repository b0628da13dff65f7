"""Type stubs of tokenmill._native, the engine under the Python package (use the package's API)."""

from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np
import numpy.typing as npt

__version__: str

class TokenmillError(RuntimeError): ...

def set_threads(threads: int) -> None: ...
def json_schema_to_gbnf(schema_json: str) -> str: ...
def json_object_gbnf() -> str: ...

class Request:
    prompt: List[int]
    max_tokens: int
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    repetition_penalty: float
    frequency_penalty: float
    presence_penalty: float
    seed: int
    stop: List[str]
    stop_token_ids: List[int]
    ignore_eos: bool
    logprobs: int
    skip_special_tokens: bool
    grammar: str
    adapter: str
    def __init__(self) -> None: ...
    def copy(self) -> "Request": ...

# (token, logprob, [(token, logprob), ...]) per generated token
NativeLogprobs = List[Tuple[int, float, List[Tuple[int, float]]]]

class Result:
    token_ids: List[int]
    text: str
    finish_reason: str
    has_logprobs: bool
    logprobs: NativeLogprobs
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int

class Stream:
    def __iter__(self) -> Iterator[Result]: ...
    def __next__(self) -> Result: ...
    def cancel(self) -> None: ...

class Tokenizer:
    def __init__(self, path: str) -> None: ...
    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]: ...
    def decode(self, ids: List[int], skip_special_tokens: bool = False) -> str: ...
    def piece(self, id: int) -> str: ...
    def token_to_id(self, piece: str) -> Optional[int]: ...
    vocab_size: int
    bos_id: Optional[int]
    eos_id: Optional[int]
    bos_token: str
    eos_token: str
    chat_template: str

class ChatTemplate:
    def __init__(self, source: str) -> None: ...
    def render(self, messages_json: str, extra_json: str, add_generation_prompt: bool, bos_token: str,
               eos_token: str) -> str: ...

class Engine:
    def __init__(self, model: str, *, device: str = "auto", lora: Mapping[str, str] = ..., chat_template: str = "",
                 context: int = 0, kv_cache_memory: int = 0, kv_cache_fraction: float = 0.2, block_size: int = 16,
                 max_batch_tokens: int = 512, max_prefill_with_decodes: int = 64, max_running: int = 64,
                 max_waiting: int = 1024, prefix_caching: bool = True, speculative: str = "",
                 speculative_rows: int = 4, no_mmap: bool = False,
                 log: Optional[Callable[[str], Any]] = None) -> None: ...
    def generate(self, requests: List[Request]) -> List[Result]: ...
    def submit(self, request: Request) -> Stream: ...
    def logits(self, ids: List[int]) -> npt.NDArray[np.float32]: ...
    def stats(self) -> Dict[str, int]: ...
    def close(self) -> None: ...
    tokenizer: Optional[Tokenizer]
    chat_template: str
    backend_name: str
    context: int
    adapter_names: List[str]

def train(data: str, out: str, *, on_step: Optional[Callable[[Dict[str, Any]], Any]] = None,
          on_eval: Optional[Callable[[Dict[str, Any]], Any]] = None, log: Optional[Callable[[str], Any]] = None,
          **options: Any) -> Optional[Dict[str, Any]]: ...
def train_options() -> List[str]: ...
def export(source: str, out: str, dtype: str = "f32", lora: str = "merged") -> str: ...
