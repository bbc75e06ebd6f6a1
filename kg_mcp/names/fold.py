"""How names are compared: case, accents and punctuation folded away, split into words.

>>> fold("Ocean's  Eleven!")
'oceans eleven'
>>> fold("Lars Løkke Rasmussen"), fold("Émile_Zola")
('lars lokke rasmussen', 'emile zola')
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from itertools import accumulate

_APOSTROPHES = re.compile(r"['’`´ʼ]")  # joined, not split: "Ocean's" is typed "oceans"
_WORD = re.compile(r"[^\W_]+")
_FTS_TOKEN = re.compile(r"[A-Za-z0-9\x80-\U0010ffff]+")  # what FTS5's ascii tokenizer keeps as words
_INSIDE = re.compile(r"(?<=\w)[^\w\s]+(?=\w)|(?<=\w)\.")  # punctuation between letters, or a full stop
_COMBINING = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")  # accents
# Letters that Unicode does not decompose into a base letter and an accent.
_LETTERS = str.maketrans({"ø": "o", "đ": "d", "ł": "l", "ħ": "h", "ı": "i", "æ": "ae", "œ": "oe", "þ": "th"})


def fold(text: str) -> str:
    """Lower case, no accents, words joined by single spaces; a name of punctuation only keeps it.

    >>> fold("$"), fold(" ")
    ('$', '')
    """
    if text.isascii():  # most names: nothing to decompose (and this runs for every name at load time)
        text = text.lower()
    else:
        text = unicodedata.normalize("NFKD", text)
        text = _COMBINING.sub("", text).casefold().translate(_LETTERS)
    return " ".join(_WORD.findall(_APOSTROPHES.sub("", text))) or " ".join(text.split())


def fold_joined(text: str) -> str | None:
    """`fold` with punctuation inside words dropped rather than splitting them, as people often type;
    None when the name has no such punctuation.

    >>> fold_joined("Modena F.C."), fold_joined("half-brother"), fold("half-brother"), fold_joined("Paris")
    ('modena fc', 'halfbrother', 'half brother', None)
    """
    joined = _INSIDE.sub("", text)
    return fold(joined) if joined != text else None


def words(text: str) -> list[str]:
    """The folded words of `text`.

    >>> words("Spielberg, Steven"), words("$")
    (['spielberg', 'steven'], [])
    """
    return _WORD.findall(fold(text))


def fts_tokens(word: str) -> list[str]:
    """`word` cut where FTS5's ascii tokenizer cuts it: at ASCII characters other than letters and digits.

    The index has no positions (detail=none), so a quoted word that FTS5 reads as two tokens would
    be a phrase query, which it refuses; the typed words are cut the same way the names were.

    >>> fts_tokens("q727\u19bfzq9mark"), fts_tokens("mecklenburg-strelitz")
    (['q727\u19bfzq9mark'], ['mecklenburg', 'strelitz'])
    """
    return _FTS_TOKEN.findall(word)


_SEPARATORS = re.compile(r"(?:[^\w\n]|_)+")  # what `fold` drops between words; newlines kept apart
_SPACES = re.compile(" +")
_PUNCTUATION = re.compile(r"[^\w\s]")
# The same for ASCII text: apostrophes dropped, other characters but letters and digits made spaces.
_ASCII_FOLD = str.maketrans(
    {c: None if c in "'`" else " " for c in map(chr, range(128)) if not c.isalnum() and c != "\n"}
)


def fold_many(texts: list[str]) -> list[str]:
    """`fold` of each text, done on all of them at once (a load folds millions of names).

    The texts are joined by newlines and folded as one string, which is the same as folding each
    one: every step works character by character and a newline is a separator to each of them.
    A text containing a newline itself, or one that folds to nothing, is folded alone.

    >>> fold_many(["Ocean's  Eleven!", "Émile_Zola", "$", "a\\nb"])
    ['oceans eleven', 'emile zola', '$', 'a b']
    """
    text = "\n".join(texts)
    if text.isascii():  # the usual case: a table lookup per character, and one pass for runs of spaces
        folded = _SPACES.sub(" ", text.lower().translate(_ASCII_FOLD)).split("\n")
    else:
        text = _COMBINING.sub("", unicodedata.normalize("NFKD", text)).casefold().translate(_LETTERS)
        folded = _SEPARATORS.sub(" ", _APOSTROPHES.sub("", text)).split("\n")
    if len(folded) != len(texts):
        return [fold(t) for t in texts]
    return [f.strip(" ") or fold(t) for f, t in zip(folded, texts)]


def fold_joined_many(texts: list[str]) -> list[str | None]:
    """`fold_joined` of each text, done on all of them at once.

    >>> fold_joined_many(["Modena F.C.", "Paris", "half-brother"])
    ['modena fc', None, 'halfbrother']
    """
    # Only texts with punctuation can change: found in one scan of them all, then looked at alone.
    starts = list(accumulate((len(t) + 1 for t in texts), initial=0))
    punctuated = sorted({bisect_right(starts, m.start()) - 1 for m in _PUNCTUATION.finditer("\n".join(texts))})
    out: list[str | None] = [None] * len(texts)
    changed = [(i, j) for i in punctuated if (j := _INSIDE.sub("", texts[i])) != texts[i]]
    for (i, _), folded in zip(changed, fold_many([j for _, j in changed])):
        out[i] = folded
    return out


def _spellings() -> dict[str, str]:
    """Each ASCII letter with the Latin letters that fold to it ("c": "cCçÇćĆ..."), drawn from Unicode."""
    out = {c: c + c.upper() for c in "abcdefghijklmnopqrstuvwxyz"}
    for code in range(0xC0, 0x250):
        letter = chr(code)
        base = fold(letter)
        if base in out and letter not in out[base]:
            out[base] += letter
    return out


_SPELLINGS = _spellings()
_APOSTROPHE_CLASS = "['’`´ʼ]?"


def loose_pattern(text: str) -> str | None:
    """A regular expression for the names that begin with `text` once folded: any case, accents
    and apostrophes, any punctuation between words; for stores whose own search has no folding.

    >>> import re
    >>> pattern = loose_pattern("Francois Truffaut")
    >>> bool(re.match(pattern, "François Truffaut")), bool(re.match(pattern, "François Ozon"))
    (True, False)
    >>> bool(re.match(loose_pattern("oceans eleven"), "Ocean's Eleven (2001)")), loose_pattern("'")
    (True, None)
    """
    folded = " ".join(words(text))
    if not folded:
        return None
    pieces = []
    for char in folded:
        if char == " ":
            pieces.append("[^a-zA-Z0-9]+")
        else:
            pieces.append(f"[{_SPELLINGS[char]}]" if char in _SPELLINGS else re.escape(char))
            pieces.append(_APOSTROPHE_CLASS)
    return "^" + "".join(pieces[:-1])
