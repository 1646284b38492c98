"""Linguistic patterns as Wizard of Tasks section 4.2 defines them.

A sentence's pattern is the dependency labels of the children of its root, in token order, with the root
itself in its place as ``ROOT``: "What should I do after heating the oil?" gives
``dobj aux nsubj ROOT prep punct``. A pattern's length is the number of children of the root (ROOT itself
not counted), so that pattern has length 5.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterator, Optional

from spacy.tokens import Doc, Span

# Table 13 groups patterns by how many sentences express them.
FREQUENCY_BUCKETS = ("(0, 1]", "(1, 10]", "(10, inf)")


def sentences(doc: Doc) -> Iterator[Span]:
    """The parser's sentences, minus stray line breaks and runs of punctuation ("!!!") nobody wrote as one."""
    for sentence in doc.sents:
        if not all(t.is_space or t.is_punct for t in sentence):
            yield sentence


def sentence_pattern(sentence: Span) -> str:
    root = sentence.root
    tokens = [*root.lefts, root, *root.rights]
    return " ".join("ROOT" if t is root else t.dep_ for t in tokens if t is root or not t.is_space)


def pattern_length(pattern: str) -> int:
    return pattern.count(" ")  # labels minus ROOT


class PatternCounter:
    """Patterns of one role: how often each occurs and the first sentences that express it."""

    def __init__(self, examples: int = 2):
        self.examples_per_pattern = examples
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}

    def add(self, sentence: Span) -> None:
        pattern = sentence_pattern(sentence)
        self.counts[pattern] += 1
        kept = self.examples.setdefault(pattern, [])
        text = sentence.text.strip()
        if len(kept) < self.examples_per_pattern and text not in kept:
            kept.append(text)

    @property
    def unique(self) -> set[str]:
        return set(self.counts)

    def summary(self, top: int) -> dict[str, Any]:
        """Table 4 (counts, sentences per pattern, length), Table 13 (buckets), Figure 4 (lengths) and
        Tables 3/11 (the most frequent patterns with at least two dependencies, with examples)."""
        sentences = sum(self.counts.values())
        unique = len(self.counts)
        lengths: Counter[int] = Counter()
        for pattern, n in self.counts.items():
            lengths[pattern_length(pattern)] += n
        buckets = Counter(_bucket(n) for n in self.counts.values())
        frequent = sorted((p for p in self.counts if pattern_length(p) >= 2), key=lambda p: (-self.counts[p], p))
        return {
            "sentences": sentences,
            "unique_patterns": unique,
            "sentences_per_pattern": _ratio(sentences, unique),
            "avg_pattern_length": _ratio(sum(k * n for k, n in lengths.items()), sentences),
            "avg_unique_pattern_length": _ratio(sum(pattern_length(p) for p in self.counts), unique),
            "length_distribution": {str(k): _ratio(lengths[k], sentences) for k in sorted(lengths)},
            "frequency_buckets": {label: _ratio(buckets[label], unique) for label in FREQUENCY_BUCKETS},
            "top": [{"pattern": p, "sentences": self.counts[p], "examples": self.examples[p]} for p in frequent[:top]],
        }


def jaccard(a: set[str], b: set[str]) -> Optional[float]:
    union = a | b
    return len(a & b) / len(union) if union else None


def _bucket(n: int) -> str:
    return FREQUENCY_BUCKETS[0] if n <= 1 else FREQUENCY_BUCKETS[1] if n <= 10 else FREQUENCY_BUCKETS[2]


def _ratio(part: float, whole: float) -> Optional[float]:
    return part / whole if whole else None
