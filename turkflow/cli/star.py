"""``turkflow star``: STAR's own files at work in turkflow; ``turkflow star train`` fits the wizard's reply
suggestions (``turkflow.protocols.star.model``) on STAR's logged dialogues.

Registered on the main group by ``turkflow.cli.main``; errors are ``turkflow.cli.common``'s one line.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import click

from turkflow.cli.common import CONTEXT, CommandError


@click.group(context_settings=CONTEXT)
def star() -> None:
    """Train the STAR wizard's reply suggestions.

    STAR: Mosig, Mehri and Kober 2020; its wizards' page suggests the replies this model ranks.
    """


@star.command("train", context_settings=CONTEXT)
@click.option("--data", "data", required=True, type=click.Path(path_type=Path, exists=True),
              help="STAR's dialogues: a folder with train.tar.gz (read in place) or dialogues/N.json, "
                   "a folder of N.json files, or the .tar.gz itself.")
@click.option("--tasks", "tasks_dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="The task schemas (one folder per task). Default: DATA/tasks, else DATA/../tasks.")
@click.option("--out", "out", type=click.Path(path_type=Path, dir_okay=False),
              help="Where to write the model (.npz). Default: the one shipped with turkflow, "
                   "turkflow/protocols/star/next_action.npz.")
@click.option("--seed", default=0, show_default=True, help="Shuffles the training; the same data and seed "
              "give the same weights.")
def star_train(data: Path, tasks_dir: Optional[Path], out: Optional[Path], seed: int) -> None:
    """Train the next-action model behind the wizard's reply suggestions.

    Reads every Wizard pick in STAR's logs with the state the page had before it, learns the schema prior
    (for any task) and one classifier per STAR task, which replies STAR offered and how its replies
    rendered yes/no fields and lists, and writes one file. Takes about two minutes on STAR's training
    split (5,388 dialogues). `python -m bench star_suggestions` cross-validates the same training.
    """
    from turkflow.protocols.star.log import read_corpus
    from turkflow.protocols.star.model import fit, gather
    from turkflow.protocols.star.schemas import load_schemas
    from turkflow.protocols.star.suggestions import MODEL_PATH

    folder = data if data.is_dir() else data.parent
    candidates = (folder / "tasks", folder.parent / "tasks")
    tasks_dir = tasks_dir or next((p for p in candidates if p.is_dir()), None)
    if tasks_dir is None:
        raise CommandError(f"no tasks/ folder beside {data}; name it with --tasks")
    source = data / "train.tar.gz" if data.is_dir() and (data / "train.tar.gz").is_file() else data
    out = out or MODEL_PATH
    started = time.perf_counter()
    schemas = load_schemas(tasks_dir)
    corpus = gather(read_corpus(source), schemas)
    if not corpus.rows:
        raise CommandError(f"no wizard picks of the tasks in {tasks_dir} in {source}")
    model = fit(corpus, schemas, seed=seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    click.echo(f"read {corpus.picks} wizard picks from {source} ({corpus.unranked} custom or unknown replies "
               f"left out), {len(corpus.rows)} training rows with and without the draft")
    click.echo(f"trained {len(model.tasks)} task classifiers and the schema prior (seed {seed}) in "
               f"{time.perf_counter() - started:.0f} s; wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
