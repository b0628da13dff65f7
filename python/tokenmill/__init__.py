"""tokenmill from Python: the native engine (continuous batching over a paged KV cache, the
CPU's quantized kernels and the CUDA backend) behind an API shaped as vLLM's offline one.

    import tokenmill
    llm = tokenmill.LLM("SmolLM2-135M-Instruct.Q4_1.gguf")
    params = tokenmill.SamplingParams(temperature=0.8, top_p=0.95, max_tokens=64, seed=1)
    for out in llm.generate(["The capital of France is", "Once upon a time"], params):
        print(out.outputs[0].text)
"""

from ._native import TokenmillError, __version__, set_threads
from .llm import LLM
from .outputs import CompletionOutput, Logprob, RequestOutput, StreamChunk
from .sampling_params import SamplingParams, StructuredOutputsParams
from .tokenizer import Tokenizer
from .training import export, train, train_options

__all__ = [
    "LLM", "SamplingParams", "StructuredOutputsParams", "RequestOutput", "CompletionOutput", "Logprob",
    "StreamChunk", "Tokenizer", "TokenmillError", "train", "train_options", "export", "set_threads", "__version__",
]

set_threads(0)  # as the CLI without --threads: every core, fewer while other processes keep some busy
