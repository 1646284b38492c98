"""How far redundant annotators agree: per label, Krippendorff's alpha (the ``krippendorff`` package), and per
turn, the majority's labels or the need for a person to decide.

Each label is a variable of its own over the turns: an act (present or not), an act's slot type (present or
not, whatever its value), each frame relation (the frame number, or none) and the whole of a turn's labels.
Alpha is nominal and takes turns with two or more annotations; with one value only (everyone always says
``inform``), alpha is undefined and reported as None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Mapping, Optional, Sequence

import krippendorff
import numpy as np

from turkflow.protocols.annotate import labels as L

WHOLE = "whole turn"  # the label that is every item of a turn at once


def majority(given: Sequence[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
    """The labels more than half of the annotations give (every item alike, ``labels.key``), or None."""
    counts: dict[frozenset, int] = {}
    for labels in given:
        counts[L.key(labels)] = counts.get(L.key(labels), 0) + 1
    for labels in given:
        if counts[L.key(labels)] * 2 > len(given):
            return dict(labels)
    return None


def variables(labels: Mapping[str, Any], names: Sequence[str]) -> dict[str, Hashable]:
    """The value of each named label in one annotation (``names`` from ``label_names``)."""
    acts = {a["act"]: {s["slot"] for s in a["slots"]} for a in labels.get("acts", [])}
    frames: dict[str, list[int]] = {}
    for f in labels.get("frames", []):
        frames.setdefault(f["relation"], []).append(f["frame"])
    values: dict[str, Hashable] = {}
    for name in names:
        kind, _, what = name.partition(" ")
        if name == WHOLE:
            values[name] = L.key(labels)
        elif kind == "act":
            values[name] = what in acts
        elif kind == "slot":
            act, _, slot = what.partition(".")
            values[name] = slot in acts.get(act, ())
        else:  # frame
            values[name] = tuple(sorted(frames.get(what, ())))
    return values


def label_names(annotations: Mapping[Any, Mapping[Any, Mapping[str, Any]]]) -> list[str]:
    """Every label some annotation uses: ``act inform``, ``slot inform.destination``, ``frame refers``,
    and ``whole turn``."""
    names: set[str] = set()
    for by_annotator in annotations.values():
        for labels in by_annotator.values():
            for item in L.items(labels):
                names.add(f"act {item[1]}" if item[0] == "act" else
                          f"slot {item[1]}.{item[2]}" if item[0] == "slot" else f"frame {item[1]}")
    return [WHOLE, *sorted(names)]


@dataclass(frozen=True)
class LabelAgreement:
    label: str
    alpha: Optional[float]  # None: undefined (one value only, or fewer than two annotations of any turn)
    turns: int  # turns with two or more annotations
    share_with_label: float  # of the annotations, the share that give it (``whole turn``: 1)


def per_label(annotations: Mapping[Any, Mapping[Any, Mapping[str, Any]]]) -> list[LabelAgreement]:
    """Alpha per label over ``annotations`` (turn -> annotator -> labels); turns with one annotation count
    for nothing."""
    shared = {unit: by for unit, by in annotations.items() if len(by) >= 2}
    names = label_names(shared)
    annotators = sorted({a for by in shared.values() for a in by}, key=str)
    units = list(shared)
    row = {a: n for n, a in enumerate(annotators)}
    given = [variables(labels, names) for by in shared.values() for labels in by.values()]
    result = []
    for name in names:
        codes: dict[Hashable, int] = {}
        data = np.full((len(annotators), len(units)), np.nan)
        for column, unit in enumerate(units):
            for annotator, labels in shared[unit].items():
                value = variables(labels, [name])[name]
                data[row[annotator], column] = codes.setdefault(value, len(codes))
        with_label = sum(1 for v in given if v[name] not in (False, ())) / len(given) if given else 0.0
        result.append(LabelAgreement(name, _alpha(data) if len(codes) > 1 else None, len(units),
                                     1.0 if name == WHOLE else round(with_label, 4)))
    return result


def _alpha(data: np.ndarray) -> Optional[float]:
    try:
        value = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    except ValueError:  # fewer than two values the annotators could disagree on
        return None
    return None if np.isnan(value) else round(float(value), 4)
