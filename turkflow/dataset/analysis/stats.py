"""The Wizard of Tasks statistics (sections 4.1 and 4.2, appendices B and D), tallied in one pass.

``CorpusStats`` takes dialogues (counts, lengths, labels, ratings, workers) and parsed utterances (tokens,
sentences, patterns) as they stream past and keeps only counters, so its memory grows with the number of
distinct patterns and workers, not with the corpus.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

from spacy.tokens import Doc

from turkflow.dataset.analysis.corpora import Dialogue
from turkflow.dataset.analysis.patterns import PatternCounter, jaccard, sentences
from turkflow.models import Role

ROLES = (Role.student, Role.teacher)
SENTENCE_BUCKETS = ("1", "2", "3", ">3")  # Table 12


def spacy_tokens(doc: Doc) -> int:
    """Tokens as the paper counts them with spaCy; runs of whitespace are not words."""
    return sum(1 for t in doc if not t.is_space)


@dataclass
class RoleTally:
    turns: int = 0
    tokens: Counter[int] = field(default_factory=Counter)  # tokens per utterance -> utterances
    sentences: Counter[int] = field(default_factory=Counter)  # sentences per utterance -> utterances
    labels: Counter[str] = field(default_factory=Counter)
    rated: int = 0
    relevant: int = 0
    useful: int = 0
    asked_urls: int = 0
    used_urls: int = 0
    shared_content: int = 0
    patterns: PatternCounter = field(default_factory=PatternCounter)


@dataclass
class WorkerTally:
    role: str
    utterances: int = 0
    tasks: set[str] = field(default_factory=set)


class CorpusStats:
    def __init__(self, top_patterns: int = 10):
        self.top_patterns = top_patterns
        self.dialogues = 0
        self.lengths: Counter[int] = Counter()  # turns per dialogue -> dialogues
        self.domains: Counter[str] = Counter()
        self.roles = {role: RoleTally() for role in ROLES}
        self.workers: dict[str, WorkerTally] = {}

    def add_dialogue(self, dialogue: Dialogue) -> None:
        self.dialogues += 1
        self.lengths[len(dialogue.turns)] += 1
        if dialogue.domain:
            self.domains[dialogue.domain] += 1
        for turn in dialogue.turns:
            tally = self.roles[turn.role]
            tally.turns += 1
            if turn.label:
                tally.labels[turn.label] += 1
            if turn.relevant is not None:
                tally.rated += 1
                tally.relevant += turn.relevant
                tally.useful += bool(turn.useful)
            if turn.used_urls is not None:
                tally.asked_urls += 1
                tally.used_urls += turn.used_urls
                tally.shared_content += bool(turn.shared_content)
            if turn.worker:
                worker = self.workers.setdefault(turn.worker, WorkerTally(role=turn.role))
                worker.utterances += 1
                if dialogue.task:
                    worker.tasks.add(dialogue.task)

    def add_utterance(self, role: str, doc: Doc) -> None:
        tally = self.roles[role]
        tally.tokens[spacy_tokens(doc)] += 1
        count = 0
        for sentence in sentences(doc):
            count += 1
            tally.patterns.add(sentence)
        tally.sentences[count] += 1

    def result(self) -> dict[str, Any]:
        turns = sum(t.turns for t in self.roles.values())
        tokens = _merge(t.tokens for t in self.roles.values())
        sentence_counts = _merge(t.sentences for t in self.roles.values())
        return {
            "dialogues": self.dialogues,
            "turns": turns,
            "utterances": sum(tokens.values()),
            "turns_per_dialogue": ratio(turns, self.dialogues),
            "tokens_per_turn": _mean(tokens),
            "sentences_per_turn": _mean(sentence_counts),
            "domains": dict(self.domains.most_common()),
            "conversation_length": _histogram(self.lengths),
            "roles": {
                role: {
                    "turns": t.turns,
                    "utterances": sum(t.tokens.values()),
                    "tokens_per_turn": _mean(t.tokens),
                    "sentences_per_turn": _mean(t.sentences),
                    "tokens": _histogram(t.tokens),
                }
                for role, t in self.roles.items()
            },
            "quality": {
                role: {"rated": t.rated, "relevance": ratio(t.relevant, t.rated),
                       "usefulness": ratio(t.useful, t.rated)}
                for role, t in self.roles.items()
            },
            "labels": {
                role: {"labelled": sum(t.labels.values()),
                       "shares": {k: ratio(n, sum(t.labels.values())) for k, n in t.labels.most_common()}}
                for role, t in self.roles.items()
            },
            "sentences_per_utterance": {role: _sentence_buckets(t.sentences) for role, t in self.roles.items()},
            "shared_information": {
                role: {"asked": t.asked_urls, "used_urls": ratio(t.used_urls, t.asked_urls),
                       "shared_content": ratio(t.shared_content, t.asked_urls)}
                for role, t in self.roles.items() if t.asked_urls
            },
            "patterns": {
                **{role: t.patterns.summary(self.top_patterns) for role, t in self.roles.items()},
                "jaccard": jaccard(*(t.patterns.unique for t in self.roles.values())),
            },
            "workers": self._workers(),
        }

    def _workers(self) -> Optional[dict[str, Any]]:
        """Section 4.1: how many people wrote the corpus, and how much each of them wrote."""
        if not self.workers:
            return None

        def summary(tallies: list[WorkerTally]) -> dict[str, Any]:
            return {
                "workers": len(tallies),
                "utterances_per_worker": ratio(sum(w.utterances for w in tallies), len(tallies)),
                "tasks_per_worker": ratio(sum(len(w.tasks) for w in tallies), len(tallies)),
            }

        everyone = list(self.workers.values())
        return {**summary(everyone),
                "roles": {role: summary([w for w in everyone if w.role == role]) for role in ROLES}}


def _merge(counters: Any) -> Counter[int]:
    total: Counter[int] = Counter()
    for c in counters:
        total.update(c)
    return total


def _mean(histogram: Counter[int]) -> Optional[float]:
    return ratio(sum(k * n for k, n in histogram.items()), sum(histogram.values()))


def ratio(part: float, whole: float) -> Optional[float]:
    return part / whole if whole else None


def _histogram(counts: Counter[int]) -> dict[str, Any]:
    total = sum(counts.values())
    return {
        "mean": _mean(counts),
        "min": min(counts) if counts else None,
        "max": max(counts) if counts else None,
        "counts": {str(k): counts[k] for k in sorted(counts)},
        "total": total,
    }


def _sentence_buckets(histogram: Counter[int]) -> dict[str, Optional[float]]:
    """Shares of utterances with 1, 2, 3 and more sentences (utterances of bare punctuation have none)."""
    bucketed: Counter[str] = Counter()
    for k, n in histogram.items():
        if k >= 1:
            bucketed[str(k) if k <= 3 else ">3"] += n
    total = sum(bucketed.values())
    return {bucket: ratio(bucketed[bucket], total) for bucket in SENTENCE_BUCKETS}
