"""Training from Python: `tokenmill train` and `tokenmill export` as calls."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Union

from . import _native

PathLike = Union[str, "os.PathLike[str]"]


def train(data: PathLike, out: PathLike, *, callback: Optional[Callable[[Dict[str, Any]], Any]] = None,
          on_eval: Optional[Callable[[Dict[str, Any]], Any]] = None, verbose: bool = True,
          **options: Any) -> Optional[Dict[str, Any]]:
    """Trains as `tokenmill train --data DATA --out OUT ...` does and returns its summary.

    data: a dataset written by `tokenmill prepare`; out: the run directory (checkpoints,
    metrics.jsonl, loss.svg).
    options: the CLI's flags with underscores (steps=200, batch=8, seq_len=128, lr=3e-4,
        precision="bf16", lora_rank=8, resume=True, ...; from_model= is --from);
        tokenmill.train_options() lists them.
    callback(metrics): after every optimizer step, with its metrics (step, steps, loss, lr,
        grad_norm, tokens_per_second, mfu, elapsed_seconds, eta_seconds, applied, loss_scale,
        ...); returning False stops the run after that step, with a checkpoint.
    on_eval(metrics): after every validation pass (step, loss, perplexity).
    verbose: print the CLI's lines (each step, evaluations, samples, checkpoints, the summary).

    Ctrl-C, or an exception in a callback, ends the run after the current step with a
    checkpoint (resume it with resume=True) and is raised afterwards. Returns the summary
    (first_step, last_step, tokens, seconds, tokens_per_second, first_eval, last_eval,
    final_sample, checkpoint, stopped_early, parameters, trainable_parameters, summary: its
    lines); None on the ranks other than 0 of a data-parallel job.
    """
    summary = _native.train(os.fspath(data), os.fspath(out), on_step=callback, on_eval=on_eval,
                            log=print if verbose else None, **options)
    if verbose and summary is not None:
        print()
        print("\n".join(summary["summary"]))
    return summary


def train_options() -> List[str]:
    """The names train() takes as options."""
    return list(_native.train_options())


def export(source: PathLike, out: PathLike, dtype: str = "f32", lora: str = "merged") -> str:
    """Writes a training checkpoint as a Hugging Face model directory, as `tokenmill export`.

    source: a run directory (its newest checkpoint that verifies) or a checkpoint file.
    dtype: the weights' type in model.safetensors: "f32", "bf16" or "f16".
    lora: for a LoRA run, "merged" (a full model, W + alpha/r B A) or "adapter" (PEFT's
        adapter_config.json + adapter_model.safetensors).
    Returns the checkpoint it exported.
    """
    return _native.export(os.fspath(source), os.fspath(out), dtype, lora)
