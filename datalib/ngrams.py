"""Word n-gram index of benchmark texts, for decontamination (SPEC §8).

Normalised words, so that a copy cannot dodge by its form: NFKD, then every format or
invisible character (Unicode Cf: zero-width spaces and joiners, soft hyphens, BOMs,
bidirectional marks) and every combining mark (accents, variation selectors, stacked
diacritics) removed, LaTeX's formatting commands dropped (`\\textbf{x}`, `\\mathrm{x}`,
`\\left(`, `\\displaystyle`) and its variants folded (`\\dfrac`, `\\tfrac` are `\\frac`), case
folded, then maximal runs of letters or digits (`\\frac{1}{2}` gives `frac 1 2`; a command
that carries meaning, `\\pi`, stays a word).
A training text is contaminated by a benchmark item when they share any n-gram (n = 8) of
those words. An item shorter than n words has no n-gram: it is matched by containment,
when its whole word sequence occurs anywhere in the training text. A part of an item (one
element of a list field, GPQA's `choices`) is indexed for its n-grams only: a short
choice like "4" identifies no item.

Speed: a window can only match when all its words occur somewhere in the benchmarks,
so we look windows up only inside runs of such words; most problems skip most windows.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_WORD = re.compile(r"[^\W_]+")  # letters or digits, any script
_FORMATTING = re.compile(  # LaTeX commands that change how a text looks, not what it says
    r"\\(?:text|textbf|textit|textrm|texttt|emph|mathrm|mathbf|mathit|mathsf|mathtt|mathnormal|boldsymbol|bm|"
    r"displaystyle|textstyle|scriptstyle|left|right|bigl|bigr|Bigl|Bigr|big|Big|bigg|Bigg|quad|qquad)(?![A-Za-z])")
_FRAC = re.compile(r"\\[dt]frac(?![A-Za-z])")
_DROPPED = {"Cf", "Mn", "Me"}  # format/invisible characters, combining and enclosing marks


def words(text: str) -> list[str]:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if unicodedata.category(c) not in _DROPPED)
    text = _FRAC.sub(r"\\frac", _FORMATTING.sub(" ", text))
    return _WORD.findall(text.casefold())


@dataclass(frozen=True)
class Overlap:
    benchmark: str
    item_id: str  # the benchmark item's id
    ngram: str  # the shared words (the first found), space-joined


class NgramIndex:
    def __init__(self, n: int = 8):
        self.n = n
        self._grams: dict[str, list[tuple[str, str]]] = {}  # ngram -> [(benchmark, item id)]
        self._whole: dict[str, list[tuple[str, str]]] = {}  # short item's words -> [(benchmark, item id)]
        self._whole_lengths: set[int] = set()  # word counts of the short items
        self._vocab: set[str] = set()
        self.items = 0

    def add(self, benchmark: str, item_id: str, text: str, part: bool = False) -> bool:
        """Index one text of an item; `part`: one element of a list field. False if it gave
        nothing to match (no word, or a part shorter than n words)."""
        ws = words(text)
        if not ws or (part and len(ws) < self.n):
            return False
        self.items += 1
        key = (benchmark, item_id)
        if len(ws) < self.n:
            self._whole.setdefault(" ".join(ws), []).append(key)
            self._whole_lengths.add(len(ws))
            return True
        self._vocab.update(ws)
        for i in range(len(ws) - self.n + 1):
            owners = self._grams.setdefault(" ".join(ws[i: i + self.n]), [])
            if key not in owners:
                owners.append(key)
        return True

    @property
    def ngram_count(self) -> int:
        return len(self._grams)

    def overlaps(self, text: str) -> list[Overlap]:
        """One Overlap per benchmark item sharing an n-gram with `text` (first n-gram found)."""
        ws = words(text)
        found: dict[tuple[str, str], str] = {}
        for length in sorted(self._whole_lengths):  # short items: contained anywhere
            for i in range(len(ws) - length + 1):
                span = " ".join(ws[i: i + length])
                for key in self._whole.get(span, ()):
                    found.setdefault(key, span)
        n, vocab, grams = self.n, self._vocab, self._grams
        run_start = 0
        for i, w in enumerate(ws):
            if w not in vocab:
                run_start = i + 1
                continue
            if i - run_start + 1 >= n:
                gram = " ".join(ws[i - n + 1: i + 1])
                for key in grams.get(gram, ()):
                    found.setdefault(key, gram)
        return [Overlap(b, item, g) for (b, item), g in found.items()]
