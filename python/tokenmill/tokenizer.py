"""Tokenizer: tokenmill's tokenizer (Hugging Face tokenizer.json or a GGUF file's vocabulary)
and chat templates, with transformers' names."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _native


class Tokenizer:
    """Tokenizes as Hugging Face's tokenizers do (checked token for token), and renders chat
    templates as transformers' apply_chat_template does (byte for byte).

    Tokenizer(path): a tokenizer.json, a GGUF file, or a model directory (its
    tokenizer.json with tokenizer_config.json beside it).
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"]):
        native = _native.Tokenizer(os.fspath(path))
        self._init(native, native.chat_template)

    @classmethod
    def _wrap(cls, native: "_native.Tokenizer", chat_template: str) -> "Tokenizer":
        self = cls.__new__(cls)
        self._init(native, chat_template)
        return self

    def _init(self, native: "_native.Tokenizer", chat_template: str) -> None:
        self._native = native
        self._chat_template = chat_template
        self._templates: Dict[str, _native.ChatTemplate] = {}

    # ------------------------------------------------------------------ text <-> ids

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of `text`; special tokens written in it are recognised (as Hugging Face's
        tokenizers do), and the BOS/EOS the tokenizer adds with add_special_tokens."""
        return self._native.encode(text, add_special_tokens)

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self._native.decode(list(token_ids), skip_special_tokens)

    def decode_token(self, token_id: int) -> str:
        """One token's text (bytes of an incomplete character as U+FFFD)."""
        return self._native.decode([token_id], False)

    def convert_ids_to_tokens(self, ids: Union[int, Sequence[int]]) -> Union[str, List[str]]:
        if isinstance(ids, int):
            return self._native.piece(ids)
        return [self._native.piece(i) for i in ids]

    def convert_tokens_to_ids(self, tokens: Union[str, Sequence[str]]) -> Union[Optional[int], List[Optional[int]]]:
        if isinstance(tokens, str):
            return self._native.token_to_id(tokens)
        return [self._native.token_to_id(t) for t in tokens]

    def __len__(self) -> int:
        return self._native.vocab_size

    @property
    def vocab_size(self) -> int:
        """Tokens, added tokens included."""
        return self._native.vocab_size

    @property
    def bos_token_id(self) -> Optional[int]:
        return self._native.bos_id

    @property
    def eos_token_id(self) -> Optional[int]:
        return self._native.eos_id

    @property
    def bos_token(self) -> Optional[str]:
        return self._native.bos_token or None

    @property
    def eos_token(self) -> Optional[str]:
        return self._native.eos_token or None

    @property
    def chat_template(self) -> Optional[str]:
        return self._chat_template or None

    # ------------------------------------------------------------------ chat

    def apply_chat_template(self, conversation: Sequence[Mapping[str, Any]],
                            tools: Optional[List[Mapping[str, Any]]] = None,
                            documents: Optional[List[Mapping[str, Any]]] = None,
                            chat_template: Optional[str] = None, add_generation_prompt: bool = False,
                            tokenize: bool = True, **kwargs: Any) -> Union[str, List[int]]:
        """Renders a conversation with the chat template (or `chat_template`, Jinja source) as
        transformers does: messages and tools keep their keys' order, None values are dropped,
        extra keyword arguments (enable_thinking, ...) become template variables. Returns the
        text with tokenize=False, else its token ids (no BOS/EOS added: the template writes them)."""
        source = chat_template if chat_template is not None else self._chat_template
        if not source:
            raise ValueError("this tokenizer has no chat template: give chat_template=")
        template = self._templates.get(source)
        if template is None:
            template = self._templates[source] = _native.ChatTemplate(source)
        extra = dict(kwargs)
        if tools is not None:
            extra["tools"] = list(tools)
        if documents is not None:
            extra["documents"] = list(documents)
        text = template.render(json.dumps(list(conversation), ensure_ascii=False),
                               json.dumps(extra, ensure_ascii=False), add_generation_prompt,
                               self._native.bos_token, self._native.eos_token)
        return self.encode(text, add_special_tokens=False) if tokenize else text
