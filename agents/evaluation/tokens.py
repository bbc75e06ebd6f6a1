"""Token counts of text a model reads, in OpenAI's o200k_base encoding (GPT-4o, GPT-4.1, o-series).

The encoder comes from the `bpe-openai` package, which bundles the o200k_base vocabulary: the file
is byte-identical to the one tiktoken downloads (same SHA-256), and the counts agree with
tiktoken's, so it works offline where tiktoken cannot fetch its file. Without it, counts are
approximate (characters / 4, rounded up) and `tokenizer_name()` says so.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

ENCODING = "o200k_base"


@lru_cache(maxsize=1)
def _encoder():
    # bpe-openai reads its bundled files, on import and on first use, with a deprecated importlib call
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import bpe_openai
        except ImportError:  # pragma: no cover - a dependency; this keeps counts usable without it
            return None
        encoder = bpe_openai.get_encoding(ENCODING)
        encoder.encode("load the vocabulary now")
    return encoder


def approximate_tokens(text: str) -> int:
    """The rough rule of thumb: a token per four characters.

    >>> approximate_tokens(""), approximate_tokens("abcde")
    (0, 2)
    """
    return math.ceil(len(text) / 4)


def count_tokens(text: str) -> int:
    """Tokens in `text` (special-token strings such as <|endoftext|> are counted as plain text)."""
    encoder = _encoder()
    if encoder is None:  # pragma: no cover
        return approximate_tokens(text)
    return len(encoder.encode(text, disallowed_special=()))


def tokenizer_name() -> str:
    return f"{ENCODING} (bpe-openai)" if _encoder() is not None else "approximate: characters / 4"
