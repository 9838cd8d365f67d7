"""Comparing OCR output with known text."""

from __future__ import annotations

import re
import unicodedata


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"<!--.*?-->", " ", text)
    return re.sub(r"\s+", "", text)


def levenshtein(a: str, b: str) -> int:
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.distance(a, b)


def cer(reference: str, hypothesis: str) -> float:
    """Character error rate ignoring whitespace: edits / reference length."""
    ref, hyp = normalise(reference), normalise(hypothesis)
    return levenshtein(ref, hyp) / max(len(ref), 1)


def word_recall(reference: str, hypothesis: str) -> float:
    """Share of the reference's words (as a multiset) found in the hypothesis, whatever their order.

    For multi-column scans, where reading order differs between a transcription and an engine.
    """
    from collections import Counter

    def words(text: str) -> Counter:
        return Counter(w for w in re.findall(r"\w+", unicodedata.normalize("NFKC", text).lower()) if len(w) > 1)

    ref, hyp = words(reference), words(hypothesis)
    return sum((ref & hyp).values()) / max(sum(ref.values()), 1)
