"""Word n-gram index of benchmark texts, for decontamination (SPEC §8).

Normalised words: NFKC, lower case, maximal runs of letters or digits (`\\frac{1}{2}`
gives `frac 1 2`; punctuation and LaTeX markup never split or join differently between
two copies of a problem). A training text is contaminated by a benchmark item when they
share any n-gram (n = 8) of those words. A benchmark text shorter than n words (a GPQA
choice like "4") has no n-gram; it is matched as a whole, only against a training text
whose entire word sequence equals it.

Speed: a window can only match when all its words occur somewhere in the benchmarks,
so we look windows up only inside runs of such words; most problems skip most windows.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_WORD = re.compile(r"[^\W_]+")  # letters or digits, any script


def words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


@dataclass(frozen=True)
class Overlap:
    benchmark: str
    item_id: str  # the benchmark item's id
    ngram: str  # the shared words (the first found), space-joined


class NgramIndex:
    def __init__(self, n: int = 8):
        self.n = n
        self._grams: dict[str, list[tuple[str, str]]] = {}  # ngram -> [(benchmark, item id)]
        self._whole: dict[str, list[tuple[str, str]]] = {}  # short text -> [(benchmark, item id)]
        self._vocab: set[str] = set()
        self.items = 0

    def add(self, benchmark: str, item_id: str, text: str) -> None:
        ws = words(text)
        if not ws:
            return
        self.items += 1
        self._vocab.update(ws)
        key = (benchmark, item_id)
        if len(ws) < self.n:
            self._whole.setdefault(" ".join(ws), []).append(key)
            return
        for i in range(len(ws) - self.n + 1):
            owners = self._grams.setdefault(" ".join(ws[i: i + self.n]), [])
            if key not in owners:
                owners.append(key)

    @property
    def ngram_count(self) -> int:
        return len(self._grams)

    def overlaps(self, text: str) -> list[Overlap]:
        """One Overlap per benchmark item sharing an n-gram with `text` (first n-gram found)."""
        ws = words(text)
        found: dict[tuple[str, str], str] = {}
        whole = " ".join(ws)
        for key in self._whole.get(whole, ()):
            found.setdefault(key, whole)
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
