"""``turkflow export`` (the dataset as files) and ``turkflow analyse`` (the paper's tables and figures).

Registered on the main group by ``turkflow.cli.main``; the plumbing (settings, sessions, one-line errors, the
progress bar) is ``turkflow.cli.common``'s.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import click

from turkflow.cli.common import CONTEXT, App, CommandError, pass_app, progress_bar, shown_url
from turkflow.words import counted

if TYPE_CHECKING:
    from sqlmodel import Session

    from turkflow.dataset.export import ExportFilters


@click.command(context_settings=CONTEXT)
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="New (or empty) directory to write the dataset into.")
@click.option("--batch", "batch_id", type=int, help="Only conversations of this batch.")
@click.option("--domain", help="Only conversations about tasks of this domain (e.g. cooking, diy).")
@click.option("--completed-only", is_flag=True, help="Only conversations that reached their end.")
@click.option("--exclude-blocked", is_flag=True,
              help="Leave out every turn (and so every rating) written by a worker who is blocked, "
                   "temporarily or permanently.")
@click.option("--scrub-pii", is_flag=True,
              help="Replace person names, emails, phone numbers, street addresses and MTurk worker ids in "
                   "free text with [NAME], [EMAIL], [PHONE], [ADDRESS], [WORKER_ID] (spaCy NER + patterns).")
@click.option("--format", "format_", type=click.Choice(["turkflow", "star", "sgd", "frames", "meep"]),
              default="turkflow", show_default=True,
              help="turkflow: the Wizard of Tasks conversations as below; star: the STAR conversations as "
                   "STAR's event logs, DIR/dialogues/<id>.json (read back by analyse --corpus star); sgd: "
                   "every conversation in the Schema-Guided Dialogue format (read back by analyse --corpus "
                   "sgd; Frames turns' acts from annotation only); frames: the Frames conversations in the "
                   "Frames corpus' JSON, with their annotated acts, slots and frames; meep: the MEEP "
                   "conversations' session logs and click-level training examples (read back by replay "
                   "--from).")
@pass_app
def export(app: App, out_dir: Path, batch_id: Optional[int], domain: Optional[str], completed_only: bool,
           exclude_blocked: bool, scrub_pii: bool, format_: str) -> None:
    """Export the dataset: one JSON document per conversation and a JSONL of all of them.

    \b
    DIR/conversations/<id>.json   one conversation (task document, every submitted turn)
    DIR/conversations.jsonl       all of them, one per line
    DIR/schema.json               the JSON Schema (draft 2020-12) every document is checked against
    DIR/dialogues/<id>.json       with --format star: one STAR dialogue (Scenario, Events)
    DIR/dialogues_NNN.json        with --format sgd: SGD dialogues (speaker, utterance, frames), and
    DIR/schema.json               the services (tasks) they use, as SGD describes services
    DIR/frames.json               with --format frames: the Frames dialogues (turns, author, text,
                                  labels with acts, slots and frames; the user's rating, wizard_survey)
    DIR/sessions/<id>.json        with --format meep: one MEEP session log (every click, where each value
                                  came from, u1_7 or v1.name, wait_for_user), executable by replay --from
    DIR/sessions/<id>.py          and the same session as Python that runs it again (MEEP's Figure 3)
    DIR/examples.jsonl            and MEEP's click-level training examples, one per agent decision
    DIR/evaluation.jsonl          where agents played: per conversation, what the agents' report reads
                                  (turkflow agents report --from DIR computes it again)
    DIR/preferences.jsonl         where people picked between two agents' replies (--pairwise): one
                                  preference pair per pick (prompt, chosen, rejected; docs/agents.md)

    Worker ids are keyed hashes (TURKFLOW_WORKER_HASH_KEY); raw crowd ids never leave the database.
    Conversations are read a page at a time, so memory stays flat however large the collection is.
    The files appear in DIR only when the export is complete.
    """
    from turkflow.dataset.export import ExportFilters

    protocol = {"star": "star", "sgd": None, "frames": "frames", "meep": "meep"}.get(format_, "wizard_of_tasks")
    filters = ExportFilters(batch_id=batch_id, domain=domain, completed_only=completed_only,
                            exclude_blocked=exclude_blocked, protocol=protocol)
    if format_ == "sgd":
        _export_sgd(app, out_dir, filters, scrub_pii)
    elif format_ in ("star", "frames", "meep"):
        _export_corpus(app, out_dir, filters, format_, refused=exclude_blocked or scrub_pii)
    else:
        _export_turkflow(app, out_dir, filters, scrub_pii)
    _export_evaluation(app, out_dir, filters)
    _export_preferences(app, out_dir, filters)


def _export_turkflow(app: App, out_dir: Path, filters: ExportFilters, scrub_pii: bool) -> None:
    from turkflow.dataset.analysis.nlp import ENTITIES, ModelMissing, load_pipeline
    from turkflow.dataset.export import ExportError, PiiScrubber, count_conversations, export_dataset

    try:
        with app.session() as session, progress_bar(transient=True) as bar:
            scrubber = PiiScrubber(load_pipeline(app.settings.spacy_model, ENTITIES)) if scrub_pii else None
            total = count_conversations(session, filters)
            if total == 0:
                raise CommandError(nothing_exported(session, filters, "no conversations"))
            task = bar.add_task("exporting conversations", total=total, detail="")
            summary = export_dataset(session, out_dir, hash_key=app.settings.worker_hash_key, filters=filters,
                                     scrubber=scrubber, on_document=lambda doc: bar.advance(task))
    except (ExportError, ModelMissing) as exc:
        raise CommandError(str(exc)) from None
    click.echo(f"exported {counted(summary.conversations, 'conversation')} ({counted(summary.turns, 'turn')}) from "
               f"{shown_url(app.database_url)} to {summary.out_dir}")


def _export_evaluation(app: App, out_dir: Path, filters: ExportFilters) -> None:
    """Beside any format, what the agents' report of the exported conversations is computed from, where agents
    played (``turkflow agents report --from DIR`` computes it again)."""
    from turkflow.agents import evaluation

    with app.session() as session:
        found = evaluation.exported_records(session, filters, app.settings.worker_hash_key)
    written = evaluation.write_records(out_dir, found)
    if written is not None:
        click.echo(f"wrote {written}: {counted(len(found), 'conversation')} agents played in, for turkflow agents report "
                   f"--from {out_dir}")


def _export_preferences(app: App, out_dir: Path, filters: ExportFilters) -> None:
    """Beside any format, the picks people made between two agents' replies, as preference pairs."""
    from turkflow.agents import pairwise

    with app.session() as session:
        found = pairwise.preferences(session, filters, app.settings.worker_hash_key)
    written = pairwise.write_preferences(out_dir, found)
    if written is not None:
        click.echo(f"wrote {written}: {len(found)} preference pairs (a person's pick between two agents' replies)")


# which --format writes a protocol's conversations (annotation's labels go out with the dialogs they label)
FORMAT_OF = {"wizard_of_tasks": "turkflow", "star": "star", "frames": "frames", "meep": "meep",
             "annotate": "frames or sgd (the labels go out with the dialogs they label)"}


def nothing_exported(session: Session, filters: ExportFilters, nothing: str) -> str:
    """Why an export wrote nothing, and which ``--format`` writes what the filters do select when the
    conversations they match follow another protocol (a STAR batch exported as Wizard of Tasks)."""
    from turkflow.dataset.export import protocols_matching

    said = f"{nothing} match these filters; nothing exported"
    found = [p for p in protocols_matching(session, filters) if p != filters.protocol and p in FORMAT_OF]
    if not found:
        return said
    where = f"batch {filters.batch_id} follows" if filters.batch_id is not None else "they select"
    return f"{said} ({where} {', '.join(found)}: " + "; ".join(
        f"{p} with --format {FORMAT_OF[p]}" for p in found) + ")"


def _export_corpus(app: App, out_dir: Path, filters: ExportFilters, format_: str, *, refused: bool) -> None:
    """STAR's and Frames' own corpus formats: written from the conversations as the corpus lays them out."""
    from turkflow.dataset.export import ExportError, count_conversations

    name = {"star": "STAR", "frames": "Frames", "meep": "MEEP"}[format_]
    if refused:
        raise CommandError(f"--exclude-blocked and --scrub-pii do not apply to --format {format_} yet")
    with app.session() as session:
        if count_conversations(session, filters) == 0:
            raise CommandError(nothing_exported(session, filters, f"no {name} conversations"))
        try:
            said, written = _write_corpus(session, out_dir, app.settings.worker_hash_key, filters, format_)
        except ExportError as exc:
            raise CommandError(str(exc)) from None
    click.echo(f"exported {said} from {shown_url(app.database_url)} to {written}")


def _write_corpus(session: Session, out_dir: Path, hash_key: str, filters: ExportFilters,
                  format_: str) -> tuple[str, Path]:
    if format_ == "star":
        from turkflow.protocols.star.dialog import export_star

        star = export_star(session, out_dir, hash_key=hash_key, filters=filters)
        return (f"{counted(star.dialogues, 'STAR dialogue')} ({counted(star.turns, 'STAR turn')} in complete ones)",
                star.out_dir)
    if format_ == "meep":
        from turkflow.dataset.meep import export_meep

        meep = export_meep(session, out_dir, hash_key=hash_key, filters=filters)
        return (f"{counted(meep.sessions, 'MEEP session log')} ({counted(meep.clicks, 'agent click')}, "
                f"{counted(meep.examples, 'click-level example')})"), meep.out_dir
    from turkflow.dataset.frames import export_frames

    frames = export_frames(session, out_dir, hash_key=hash_key, filters=filters)
    return (f"{counted(frames.dialogues, 'Frames dialogue')} ({counted(frames.turns, 'turn')}, "
            f"{frames.annotated_turns} with annotated acts)", frames.out_file)


def _export_sgd(app: App, out_dir: Path, filters: ExportFilters, scrub_pii: bool) -> None:
    from dataclasses import replace

    from turkflow.protocols import registry
    from turkflow.dataset.analysis.nlp import ENTITIES, ModelMissing, load_pipeline
    from turkflow.dataset.export import ExportError, PiiScrubber, count_conversations
    from turkflow.dataset.sgd import export_sgd

    with app.session() as session:
        if count_conversations(session, filters) == 0:
            raise CommandError(nothing_exported(session, filters, "no conversations"))
        logged = sum(count_conversations(session, replace(filters, protocol=name)) for name in registry.LOGGED)
        if (filters.exclude_blocked or scrub_pii) and logged:
            raise CommandError("--exclude-blocked and --scrub-pii do not apply to STAR, Frames or MEEP "
                               "conversations yet; choose a Wizard of Tasks batch with --batch")
        try:
            scrubber = PiiScrubber(load_pipeline(app.settings.spacy_model, ENTITIES)) if scrub_pii else None
            summary = export_sgd(session, out_dir, hash_key=app.settings.worker_hash_key, filters=filters,
                                 scrubber=scrubber)
        except (ExportError, ModelMissing) as exc:
            raise CommandError(str(exc)) from None
    click.echo(f"exported {counted(summary.dialogues, 'dialogue')} ({counted(summary.turns, 'turn')}) in the Schema-Guided "
               f"Dialogue format from {shown_url(app.database_url)} to {summary.out_dir}")


@click.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--corpus", type=click.Choice(["turkflow", "sgd", "star"]), default="turkflow", show_default=True,
              help="What PATHS hold: a turkflow export (conversations.jsonl or its directory), SGD "
                   "dialogues_*.json[.gz] files or directories, or STAR dialogue files or directories.")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Directory for stats.json, report.html and figures/.")
@click.option("--limit", type=click.IntRange(min=1), help="Analyse only the first N dialogues.")
@click.option("--title", help="Heading of the HTML report.  [default: the corpus and its inputs]")
@click.option("--top-patterns", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many of the most frequent patterns to list, with examples.")
@click.option("--batch-size", type=click.IntRange(min=1), default=256, show_default=True,
              help="Utterances per spaCy batch (nlp.pipe).")
@click.option("--n-process", type=click.IntRange(min=1), default=1, show_default=True,
              help="spaCy worker processes (nlp.pipe n_process).")
@click.option("--schemas", "schemas_dir", type=click.Path(path_type=Path, file_okay=False),
              help="STAR task schemas (a folder of task folders), to judge whether wizards ask the schema's "
                   "questions in order.  [default: tasks/ beside a STAR root's dialogues/]")
@pass_app
def analyse(app: App, paths: tuple[Path, ...], corpus: str, out_dir: Path, limit: Optional[int],
            title: Optional[str], top_patterns: int, batch_size: int, n_process: int,
            schemas_dir: Optional[Path]) -> None:
    """Compute the Wizard of Tasks statistics of a dataset.

    Writes DIR/stats.json (dialogues, turns, turns_per_dialogue, tokens_per_turn, per-role quality,
    labels, lengths, dependency patterns and workers), DIR/figures/*.png and one self-contained
    DIR/report.html. The spaCy pipeline is TURKFLOW_SPACY_MODEL, run with only its parser. A STAR
    corpus also gets STAR's measures of the wizard (stats.json "star"): suggestions picked vs replies
    written, queries per dialogue and, given task schemas, the share of single-task dialogues whose
    wizard asks the schema's first questions in order (STAR's Table 8).

    \b
    Compare a collection with a public corpus:
      turkflow export --out dataset
      turkflow analyse dataset --out analysis/ours
      turkflow analyse --corpus sgd ../shared/data/sgd/dev --out analysis/sgd
    """
    from turkflow.dataset.analysis.corpora import CorpusError, read_corpus
    from turkflow.dataset.analysis.nlp import SYNTAX, ModelMissing, load_pipeline
    from turkflow.dataset.analysis.run import analyse as run_analysis
    from turkflow.dataset.analysis.run import write_outputs
    from turkflow.dataset.analysis.star import schemas_beside
    from turkflow.protocols.star.schemas import load_schemas

    if schemas_dir is not None and corpus != "star":
        raise CommandError("--schemas: only a STAR corpus (--corpus star) has task schemas")
    try:
        dialogues, source = read_corpus(corpus, paths)
        schemas_dir = schemas_dir or (schemas_beside(paths) if corpus == "star" else None)
        schemas = load_schemas(schemas_dir) if schemas_dir is not None else None
        if limit is not None:
            dialogues = itertools.islice(dialogues, limit)
        dialogues = list(dialogues)  # read once, to count the utterances the progress shows out of
        nlp = load_pipeline(app.settings.spacy_model, SYNTAX)
        with progress_bar(transient=True) as bar:
            task = bar.add_task(f"parsing {corpus} utterances", detail="",
                                total=sum(1 for d in dialogues for turn in d.turns if turn.text.strip()))
            stats = run_analysis(dialogues, nlp, source, batch_size=batch_size, n_process=n_process,
                                 top_patterns=top_patterns, on_utterance=lambda: bar.advance(task),
                                 star_schemas=schemas)
    except (CorpusError, ModelMissing) as exc:
        raise CommandError(str(exc)) from None
    if stats["dialogues"] == 0:
        raise CommandError(f"no dialogues found in {', '.join(map(str, paths))}")
    write_outputs(stats, out_dir, title or f"{corpus}: {', '.join(map(str, paths))}")
    click.echo(f"{stats['dialogues']} dialogues, {stats['turns']} turns, "
               f"{stats['turns_per_dialogue']:.2f} turns per dialogue, "
               f"{stats['tokens_per_turn'] or 0:.2f} tokens per turn; report: {out_dir / 'report.html'}")
    order = stats.get("star", {}).get("wizard_order")
    if order and order["follow"] is not None:
        click.echo(f"wizards asked the schema's first questions in order in {100 * order['follow']:.1f}% of "
                   f"{order['single_task_dialogues']} single-task dialogues (STAR's Table 8: 91%)")


@click.command(context_settings=CONTEXT)
@click.argument("conversation_id", type=int, required=False)
@click.option("--batch", "batch_id", type=int, help="Every conversation of this STAR, Frames or MEEP batch.")
@click.option("--from", "exported", multiple=True, type=click.Path(path_type=Path, exists=True),
              help="MEEP session logs exported with export --format meep (the export's folder, its sessions/ "
                   "or session files; repeatable): executed from the files, not the database.")
@click.option("--folder", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="With --from: the MEEP folder (apis.json, templates.json) to execute against.  [default: "
                   "each session's own, as exported]")
@pass_app
def replay(app: App, conversation_id: Optional[int], batch_id: Optional[int], exported: tuple[Path, ...],
           folder: Optional[Path]) -> None:
    """Run a conversation's logged actions again: STAR's queries, Frames' searches, MEEP's clicks.

    Prints each action that now gives something else than what was logged (which one, and both values;
    a MEEP click's template or API result) and exits with status 1 if any does; an untouched log replays
    clean. With --from, MEEP's exported session logs are read back and executed instead.
    """
    from sqlmodel import select

    from turkflow.protocols import registry
    from turkflow.models import Batch, Conversation

    if exported:
        if conversation_id is not None or batch_id is not None:
            raise CommandError("give CONVERSATION_ID, --batch ID or --from PATH, one of them")
        _replay_exported(exported, folder)
        return
    if folder is not None:
        raise CommandError("--folder applies to --from only")
    if (conversation_id is None) == (batch_id is None):
        raise CommandError("give either CONVERSATION_ID or --batch ID")
    with app.session() as session:
        if batch_id is not None:
            batch = session.get(Batch, batch_id)
            ids = list(session.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)
                                    .order_by(Conversation.id))) if batch is not None else []
        else:
            conversation = session.get(Conversation, conversation_id)
            batch = session.get(Batch, conversation.batch_id) if conversation is not None else None
            ids = [conversation_id]
        logged = registry.logged(batch.protocol) if batch is not None else None
        if logged is None:
            what = f"batch {batch_id}" if batch_id is not None else f"conversation {conversation_id}"
            raise CommandError(f"no STAR, Frames or MEEP {what}: only their logs replay")
        replayed, differences = registry.parts(logged.name).replay(session, ids)
    for difference in differences:
        click.echo(difference.describe())
    click.echo(f"replayed {replayed} {logged.replayed} in {len(ids)} conversations: {len(differences)} differ")
    if differences:
        raise SystemExit(1)


def _replay_exported(paths: tuple[Path, ...], folder: Optional[Path]) -> None:
    from turkflow.dataset.meep import replay_sessions
    from turkflow.errors import InvalidDocument

    try:
        sessions, ran, differences = replay_sessions(paths, folder)
    except InvalidDocument as exc:
        raise CommandError(str(exc)) from None
    for difference in differences:
        click.echo(difference)
    click.echo(f"replayed {ran} clicks in {sessions} exported MEEP sessions: {len(differences)} differ")
    if differences:
        raise SystemExit(1)
