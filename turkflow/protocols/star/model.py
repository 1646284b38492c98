"""Training the next-action model the wizard's suggestions use (``turkflow star train``).

From STAR's logged dialogues it learns, for every wizard pick, which reply the wizard picked given what the
page knew (``log.picks``): the schema prior's weights over all tasks (a conditional logit over
``suggestions.PRIOR_FEATURES``, fitted by Newton's method), then per task a multinomial logistic regression
over the dialog's features (``suggestions.state_features``) on top of the prior (mini-batch Adam, shuffled
by the seed: the same data and seed give the same weights). Each pick is learned twice, with the wizard's
draft and without it, because the page asks for suggestions both before and after the wizard types.

It also learns what STAR offered: which schema labels its wizards were ever shown as replies (the rest,
"Yes", "Available", "Failed", are non-replies and never suggested) and how its replies rendered yes/no fields,
lists and values (``suggestions.Renderings``). Only numpy; nothing is downloaded.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from turkflow.protocols.star import log
from turkflow.protocols.star.schemas import TaskSchema, Template
from turkflow.protocols.star.suggestions import (
    PRIOR_FEATURES,
    DialogState,
    NextActionModel,
    Renderings,
    SchemaFacts,
    TaskWeights,
    field_for,
    state_features,
)

DEFAULTS = {"l2_prior": 1e-3, "l2": 1e-4, "epochs": 12, "batch": 256, "rate": 0.05, "min_count": 2}


@dataclass(frozen=True)
class Row:
    """One logged pick as the model sees it: every reply of the task with its prior features."""

    dialogue: int
    task: str
    label: str
    drafted: bool              # the state carries the wizard's draft
    prior: np.ndarray          # one row of PRIOR_FEATURES per label of ``labels``
    features: tuple[str, ...]  # state_features(state)


@dataclass
class Corpus:
    """What the training split says, gathered in one pass over the dialogues."""

    rows: list[Row]
    labels: Mapping[str, tuple[str, ...]]  # per task: its replies in the schema's order
    offered: Mapping[str, Counter]         # per dialogue id: Counter of (task, label) offered as options
    renders: list[tuple[int, Template, str, dict[str, Any]]]  # (dialogue, template, sent text, item)
    picks: int = 0
    unranked: int = 0


def _options(task: TaskSchema, event: Mapping[str, Any], aliases: Mapping[tuple[str, str], str]) -> set[str]:
    shown = set()
    for option in event.get("ActionLabelOptions") or ():
        if option in task.templates and not task.templates[option].is_query:
            shown.add(option)
        elif (task.name, option) in aliases:
            shown.add(aliases[task.name, option])
    return shown


def gather(dialogues: Iterable[Mapping[str, Any]], schemas: Mapping[str, TaskSchema],
           keep: Optional[list] = None) -> Corpus:
    """Every pick of ``dialogues`` as training rows (with and without the draft), what STAR offered, and
    the replies whose slots show how values were rendered. ``keep`` collects every ``log.Pick`` too."""
    rows, renders, option_events = [], [], []
    alias_votes: dict[tuple[str, str], Counter] = defaultdict(Counter)
    facts = {name: SchemaFacts.of(schema, ()) for name, schema in schemas.items()}
    picks = unranked = 0
    for dialogue in dialogues:
        for pick in log.picks(dialogue, schemas):
            picks += 1
            if keep is not None:
                keep.append(pick)
            raw = pick.event.get("ActionLabel")
            if pick.label is None:
                unranked += 1
                continue
            if raw and raw != pick.label:
                alias_votes[pick.task, raw][pick.label] += 1
            option_events.append((pick.dialogue, pick.task, pick.event))
            task_facts = facts[pick.task]
            variants = [pick.state] + ([DialogState(**{**pick.state.__dict__, "draft": ""})]
                                       if pick.state.draft else [])
            for state in variants:
                rows.append(Row(pick.dialogue, pick.task, pick.label, bool(state.draft),
                                task_facts.features(state, task_facts.replies), tuple(state_features(state))))
            template = schemas[pick.task].templates[pick.label]
            shown = pick.event.get("PrimaryItem")
            if template.slots and shown and shown.get("APIName") == schemas[pick.task].api:
                renders.append((pick.dialogue, template, pick.event.get("Text") or "",
                                {k: v for k, v in shown.items() if k != "APIName"}))
    aliases = {key: votes.most_common(1)[0][0] for key, votes in alias_votes.items()}
    offered: dict[Any, Counter] = defaultdict(Counter)
    for dialogue_id, task, event in option_events:
        for label in _options(schemas[task], event, aliases):
            offered[dialogue_id][task, label] += 1
    return Corpus(rows, {name: f.replies for name, f in facts.items()}, offered, renders, picks, unranked)


# ---- what STAR offered ------------------------------------------------------------------------------------


def non_replies(corpus: Corpus, schemas: Mapping[str, TaskSchema],
                dialogues: Optional[set] = None) -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    """Per task, the answer nodes (``_answer_node``) STAR never offered as replies in ``dialogues`` (all by
    default); and the labels no task offered. A reply STAR's server happened never to offer
    (``restaurant_inform_search_results``) is still a reply. Tasks the dialogues never show are left out."""
    offered: Counter = Counter()
    for dialogue_id, counts in corpus.offered.items():
        if dialogues is None or dialogue_id in dialogues:
            offered.update(counts)
    seen_tasks = {task for task, _ in offered}
    per_task = {name: frozenset(label for label in corpus.labels[name]
                                if not offered[name, label] and _answer_node(schemas[name], label))
                for name in schemas if name in seen_tasks}
    everywhere: dict[str, bool] = defaultdict(bool)
    for name in seen_tasks:
        for label in corpus.labels[name]:
            everywhere[label] |= bool(offered[name, label]) or not _answer_node(schemas[name], label)
    return per_task, frozenset(label for label, sayable in everywhere.items() if not sayable)


def _answer_node(schema: TaskSchema, label: str) -> bool:
    """A node that stands for what the user or the knowledge base answers, not for something the wizard
    says: it has no slot, and nothing leads to it in the chart or its text is a word or two ("Yes",
    "Available", "Done", "Info missing. Can't remember your PIN")."""
    targets = set(schema.graph.edges.values())
    template = schema.templates[label]
    root = label in schema.graph.edges and label not in targets and label != schema.graph.start
    return not template.slots and (root or len(re.findall(r"[A-Za-z0-9']+", template.text)) <= 2)


# ---- how STAR rendered slot values -----------------------------------------------------------------------


def _capture(template: Template, text: str) -> Optional[dict[str, str]]:
    parts = re.split(r"\{[^}]*\}", template.text)
    pattern = r"\s*" + r"(.+?)".join(re.escape(" ".join(p.split())) for p in parts) + r"\s*$"
    found = re.match(pattern, " ".join(text.split()), re.S)
    if not found:
        return None
    captured: dict[str, str] = {}
    for slot, value in zip(template.slots, found.groups()):
        captured.setdefault(slot.name, value.strip())
    return captured


def _abstract(rendered: str, item: Mapping[str, Any], own: str) -> str:
    """``rendered`` with other fields' text values named (``east`` -> ``{BalconySide}``)."""
    for key, value in item.items():
        if key != own and isinstance(value, str) and len(value) >= 3 and re.search(
                r"\b" + re.escape(value) + r"\b", rendered):
            rendered = re.sub(r"\b" + re.escape(value) + r"\b", "{" + key + "}", rendered)
    return rendered


def learn_renderings(renders: Iterable[tuple[int, Template, str, Mapping[str, Any]]],
                     dialogues: Optional[set] = None, least: int = 2) -> Renderings:
    """For each slot, how STAR's sent replies showed its values: a yes/no field's two phrasings, a list's
    element wording and separators, and value spellings that differ from the value ("an Economy")."""
    booleans: dict[tuple[str, bool], Counter] = defaultdict(Counter)
    lists: dict[str, Counter] = defaultdict(Counter)
    values: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for dialogue_id, template, text, item in renders:
        if dialogues is not None and dialogue_id not in dialogues:
            continue
        if not re.search(r"\w", re.sub(r"\{[^}]*\}", "", template.text)):
            continue  # "{message:s}": nothing tells the value from what the wizard added
        captured = _capture(template, text)
        if not captured:
            continue
        for slot, rendered in captured.items():
            key = field_for(slot, item)
            if key is None:
                continue
            value = item[key]
            if isinstance(value, bool):
                booleans[slot, value][_abstract(rendered, item, key)] += 1
            elif isinstance(value, list) and len(value) >= 2 and all(isinstance(v, str) for v in value):
                first, second = rendered.find(value[0]), rendered.find(value[-1])
                if 0 <= first < second:
                    prefix = rendered[:first]
                    between = rendered[first + len(value[0]):second]
                    if between.endswith(prefix):
                        last = between[:len(between) - len(prefix)]
                        lists[slot][prefix + "{}", ", " if len(value) == 2 else last, last] += 1
            elif isinstance(value, str) and re.fullmatch(r"(a|an|the) " + re.escape(value.strip()), rendered):
                values[slot, value][rendered] += 1
    learned_booleans = {}
    for slot in {slot for slot, _ in booleans}:
        true, false = booleans.get((slot, True)), booleans.get((slot, False))
        if true and false and sum(true.values()) >= least and sum(false.values()) >= least:
            learned_booleans[slot] = (true.most_common(1)[0][0], false.most_common(1)[0][0])
    learned_lists = {slot: counts.most_common(1)[0][0] for slot, counts in lists.items()
                     if counts.most_common(1)[0][1] >= least}
    learned_values: dict[str, dict[str, str]] = defaultdict(dict)
    for (slot, value), counts in values.items():
        rendered, times = counts.most_common(1)[0]
        if rendered != value and times >= least and times > sum(counts.values()) / 2:
            learned_values[slot][value] = rendered
    return Renderings(learned_booleans, learned_lists, dict(learned_values))


# ---- fitting --------------------------------------------------------------------------------------------


def _masks(labels: Mapping[str, Sequence[str]],
           excluded: Mapping[str, frozenset[str]]) -> dict[str, np.ndarray]:
    return {task: np.array([label not in excluded.get(task, ()) for label in names])
            for task, names in labels.items()}


def _softmax(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=1, keepdims=True)
    exp = np.exp(scores)
    return exp / exp.sum(axis=1, keepdims=True)


def _by_task(rows: Sequence[Row], labels: Mapping[str, Sequence[str]], masks: Mapping[str, np.ndarray]):
    """Per task: the rows, their prior tensors (n x labels x features) and the picked label's index."""
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if masks[row.task][labels[row.task].index(row.label)]:
            grouped[row.task].append(row)
    out = {}
    for task, members in sorted(grouped.items()):
        index = {label: i for i, label in enumerate(labels[task])}
        out[task] = (members, np.stack([r.prior for r in members]),
                     np.array([index[r.label] for r in members]))
    return out


def _prior_terms(grouped, masks: Mapping[str, np.ndarray], weights: np.ndarray, l2: float):
    """The prior's mean negative log-likelihood (plus L2), its gradient and its Hessian at ``weights``."""
    size = len(PRIOR_FEATURES)
    total = sum(len(members) for members, _, _ in grouped.values())
    loss, gradient, hessian = 0.5 * l2 * weights @ weights, l2 * weights, l2 * np.eye(size)
    for task, (_, prior, picked) in grouped.items():
        n, labels, _ = prior.shape
        flat = prior.reshape(-1, size)
        p = _softmax((flat @ weights.astype(np.float32)).reshape(n, labels), masks[task][None, :])
        loss -= np.log(np.maximum(p[np.arange(n), picked], 1e-30)).sum() / total
        residual = p.copy()
        residual[np.arange(n), picked] -= 1.0
        gradient += flat.T @ residual.reshape(-1) / total
        p = p.astype(np.float32)
        mean = np.matmul(p[:, None, :], prior)[:, 0, :]
        hessian += ((flat * p.reshape(-1, 1)).T @ flat - mean.T @ mean) / total
    return loss, gradient, hessian


def fit_prior(grouped, masks: Mapping[str, np.ndarray], l2: float, steps: int = 20) -> np.ndarray:
    """The schema prior's weights: a conditional logit over every task's picks, by Newton's method with a
    step halved until the loss goes down (a full Newton step overshoots on nearly separable features)."""
    weights = np.zeros(len(PRIOR_FEATURES))
    loss, gradient, hessian = _prior_terms(grouped, masks, weights, l2)
    for _ in range(steps):
        step = np.linalg.solve(hessian, gradient)
        for _ in range(20):
            trial = weights - step
            trial_loss, trial_gradient, trial_hessian = _prior_terms(grouped, masks, trial, l2)
            if trial_loss <= loss:
                break
            step = step / 2
        else:
            break
        done = loss - trial_loss < 1e-7
        weights, loss, gradient, hessian = trial, trial_loss, trial_gradient, trial_hessian
        if done:
            break
    return weights


def fit_task(members: Sequence[Row], prior: np.ndarray, picked: np.ndarray, mask: np.ndarray,
             offset_weights: np.ndarray, labels: Sequence[str], rng: np.random.Generator,
             options: Mapping[str, Any]) -> TaskWeights:
    """One task's multinomial logistic regression on top of the prior (mini-batch Adam, L2)."""
    counts = Counter(f for row in members for f in row.features)
    kept = sorted(f for f, n in counts.items() if n >= options["min_count"])
    vocabulary = {f: i for i, f in enumerate(kept)}
    indices = [np.array([vocabulary[f] for f in row.features if f in vocabulary], dtype=np.int64)
               for row in members]
    offsets = prior @ offset_weights
    weights = np.zeros((len(vocabulary), len(labels)))
    first, second = np.zeros_like(weights), np.zeros_like(weights)
    beta1, beta2, step = 0.9, 0.999, 0
    order = np.arange(len(members))
    for _ in range(options["epochs"]):
        rng.shuffle(order)
        for start in range(0, len(order), options["batch"]):
            batch = order[start:start + options["batch"]]
            parts = [indices[i] for i in batch]
            lengths = np.array([len(part) for part in parts])
            flat = np.concatenate(parts)
            owner = np.repeat(np.arange(len(batch)), lengths)
            scores = offsets[batch].copy()
            starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            filled = lengths > 0
            scores[filled] += np.add.reduceat(weights[flat], starts[filled], axis=0)
            p = _softmax(scores, mask[None, :])
            p[np.arange(len(batch)), picked[batch]] -= 1.0
            by_feature = np.argsort(flat, kind="stable")
            touched, first_of = np.unique(flat[by_feature], return_index=True)
            gradient = options["l2"] * weights
            gradient[touched] += np.add.reduceat(p[owner[by_feature]], first_of, axis=0) / len(batch)
            step += 1
            first = beta1 * first + (1 - beta1) * gradient
            second = beta2 * second + (1 - beta2) * gradient ** 2
            weights -= options["rate"] * (first / (1 - beta1 ** step)) / (
                np.sqrt(second / (1 - beta2 ** step)) + 1e-8)
    weights[:, ~mask] = 0.0
    # kept at the precision the file stores, so a model ranks the same before and after saving
    return TaskWeights(tuple(labels), vocabulary, weights.astype(np.float16).astype(np.float32))


def fit(corpus: Corpus, schemas: Mapping[str, TaskSchema], seed: int = 0,
        dialogues: Optional[set] = None, **options: Any) -> NextActionModel:
    """The model learned from ``corpus`` (only ``dialogues``' picks when given: a cross-validation fold)."""
    settings = {**DEFAULTS, **options}
    rng = np.random.default_rng(seed)
    excluded, common = non_replies(corpus, schemas, dialogues)
    masks = _masks(corpus.labels, excluded)
    rows = [r for r in corpus.rows if dialogues is None or r.dialogue in dialogues]
    grouped = _by_task(rows, corpus.labels, masks)
    prior = fit_prior(grouped, masks, settings["l2_prior"])
    tasks = {task: fit_task(members, tensor, picked, masks[task], prior, corpus.labels[task], rng, settings)
             for task, (members, tensor, picked) in grouped.items()}
    renderings = learn_renderings(corpus.renders, dialogues)
    meta = {"seed": seed, "rows": len(rows), "options": settings}
    return NextActionModel(prior.astype(np.float32), tasks, excluded, common, renderings, meta)


def train(dialogues: Iterable[Mapping[str, Any]], schemas: Mapping[str, TaskSchema], seed: int = 0,
          **options: Any) -> NextActionModel:
    """``turkflow star train``: gather the dialogues' picks and fit the model on all of them."""
    return fit(gather(dialogues, schemas), schemas, seed, **options)
