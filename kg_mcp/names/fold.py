"""How names are compared: case, accents and punctuation folded away, split into words.

>>> fold("Ocean's  Eleven!")
'oceans eleven'
>>> fold("Lars Løkke Rasmussen"), fold("Émile_Zola")
('lars lokke rasmussen', 'emile zola')
"""

from __future__ import annotations

import re
import unicodedata

_APOSTROPHES = re.compile(r"['’`´ʼ]")  # joined, not split: "Ocean's" is typed "oceans"
_WORD = re.compile(r"[^\W_]+")
_INSIDE = re.compile(r"(?<=\w)[^\w\s]+(?=\w)|(?<=\w)\.")  # punctuation between letters, or a full stop
# Letters that Unicode does not decompose into a base letter and an accent.
_LETTERS = str.maketrans({"ø": "o", "đ": "d", "ł": "l", "ħ": "h", "ı": "i", "æ": "ae", "œ": "oe", "þ": "th"})


def fold(text: str) -> str:
    """Lower case, no accents, words joined by single spaces; a name of punctuation only keeps it.

    >>> fold("$"), fold(" ")
    ('$', '')
    """
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold().translate(_LETTERS)
    return " ".join(_WORD.findall(_APOSTROPHES.sub("", text))) or " ".join(text.split())


def fold_joined(text: str) -> str:
    """`fold` with punctuation inside words dropped rather than splitting them, as people often type.

    >>> fold_joined("Modena F.C."), fold_joined("half-brother"), fold("half-brother")
    ('modena fc', 'halfbrother', 'half brother')
    """
    return fold(_INSIDE.sub("", text))


def words(text: str) -> list[str]:
    """The folded words of `text`.

    >>> words("Spielberg, Steven"), words("$")
    (['spielberg', 'steven'], [])
    """
    return _WORD.findall(fold(text))
