"""``turkflow simulate``: a simulated crowd works a batch through the real stack and the report says how
fast it went, what it cost and how well the quality monitor caught the bad workers.

Its options name only what ``turkflow.simulator`` names without imports; each function here imports the
simulator's parts it runs, so ``turkflow simulate --help`` starts as fast as ``turkflow --help``."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import click

from turkflow.cli.common import CONTEXT, App, dollars, pass_app, progress_bar, table
from turkflow.config import Settings, default
from turkflow.simulator import DEFAULT_POLICIES, PLAYED

if TYPE_CHECKING:
    from turkflow.simulator.annotate import AnnotateConfig
    from turkflow.simulator.compare import CompareConfig
    from turkflow.simulator.run import SimulationConfig


@click.command("simulate", context_settings=CONTEXT)
@click.option("--students", default=10, show_default=True, help="Simulated students (STAR: users).")
@click.option("--teachers", default=10, show_default=True, help="Simulated teachers (STAR: wizards).")
@click.option("--conversations", default=10, show_default=True, help="Conversations in the simulated batch.")
@click.option("--max-turns", default=default("max_turns"), show_default=True, help="Maximum turns per conversation.")
@click.option("--mean-turns", type=int, default=None,
              help="Draw conversation lengths around this mean (default: as long as each replayed dialog).")
@click.option("--spammers", default=0.15, show_default=True, help="Share of each role writing random or repeated text.")
@click.option("--lazy", default=0.0, show_default=True, help="Share of each role writing very short replies.")
@click.option("--careless", default=0.10, show_default=True, help="Share of each role rating at random.")
@click.option("--harsh", default=0.0, show_default=True, help="Share of each role rating every turn 'no'.")
@click.option("--pasters", default=0.0, show_default=True,
              help="Share of each role pasting text a language model wrote (good text, no keystrokes; the "
                   "not_typed flag catches it).")
@click.option("--think-time", default=0.0, show_default=True,
              help="Mean seconds a worker takes before submitting (drawn between 0 and twice this).")
@click.option("--concurrency", default=16, show_default=True, help="Workers making requests at the same time.")
@click.option("--seed", default=1, show_default=True, help="The same seed gives the same turns, blocks and money.")
@click.option("--policy", default=None,
              help="Block policy of the simulated batch: paper, probation or recommended (as for batch launch "
                   "--policy), "
                   "k=5,p=0.5 (block when the mean relevance or usefulness "
                   "of the last k rated turns is below p), a staged or pooled one as for --compare, or none, to "
                   "collect every worker's full ratings (default: the TURKFLOW_* quality settings).")
@click.option("--compare", "compare_", multiple=True,
              help="A policy to replay on the collected ratings (repeatable); also staged ones such as "
                   "'k=5,p=0.4 for 6, then k=20,p=0.4' and pooled ones (the mean of relevance and usefulness "
                   f"together against p) such as 'pooled k=6,p=0.5'. Default: {'; '.join(DEFAULT_POLICIES)}.")
@click.option("--dialogs", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory of SGD dialogues_*.json.gz to replay, such as SGD's whole dev split (default: the "
                   "slice of it that comes with turkflow, 204 dialogs). With "
                   "--protocol star: a STAR root (tasks/, apis/ and, to replay STAR's sample dialogues, "
                   "dialogues/), e.g. ../shared/data/star (default: turkflow's sample STAR tasks, with "
                   "dialogues generated along their flow charts).")
@click.option("--protocol", type=click.Choice(["wizard_of_tasks", *PLAYED, "annotate", "compare"]),
              default="wizard_of_tasks",
              show_default=True,
              help="star: users and wizards play STAR on its pages (queries, suggestions, custom replies, "
                   "the end-of-dialog questions), after passing its staged qualification; frames: users "
                   "pursue generated goals while wizards search the sample database; meep: agents answer by "
                   "clicks only. All three on the local provider or Prolific's fake. annotate: --annotators with a hidden "
                   "accuracy (--careless of them careless) label a simulated Frames batch of --conversations, "
                   "--per-turn of them each turn, in this process; the report gives their agreement, the "
                   "dataset's labels against the truth and the monitor's precision and recall. compare: "
                   "--judges of a hidden accuracy and position bias (--careless of them careless or one-sided) "
                   "compare the dialogs of --systems of known strength side by side until --votes count; the "
                   "report gives Kendall's tau of the ranking against the true order and the share of careless "
                   "judges the monitor caught within their first 10 votes, in this process.")
@click.option("--annotators", default=10, show_default=True, help="annotate: simulated annotators.")
@click.option("--per-turn", default=3, show_default=True, help="annotate: annotators per turn.")
@click.option("--gold", default=0.2, show_default=True,
              help="annotate: share of turns the requester marks gold with their true labels.")
@click.option("--systems", default=4, show_default=True,
              help="compare: systems of known strength (each beats the next weaker one 60% of the time).")
@click.option("--votes", default=400, show_default=True, help="compare: votes the ranking counts at the end.")
@click.option("--judges", default=20, show_default=True, help="compare: simulated judges.")
@click.option("--pairs", "pair_strategy", type=click.Choice(["adaptive", "uniform"]), default="adaptive",
              show_default=True, help="compare: how pairs of systems are drawn (as batch launch --pairs).")
@click.option("--provider", type=click.Choice(["local", "prolific"]), default="local", show_default=True,
              help="Crowd platform of the batch: local (invited workers on the queue) or prolific "
                   "(participants work through Prolific studies on a fake Prolific on a loopback port).")
@click.option("--prolific-time-outs", default=0.0, show_default=True,
              help="With --provider prolific: share of written turns whose participant never goes back to "
                   "Prolific, so the submission times out with the turn stored (turkflow must still pay it once).")
@click.option("--prolific-lost-pays", default=0, show_default=True,
              help="With --provider prolific: the first N bonus pay calls fail on Prolific's side and pay nothing, "
                   "as a pay lost after turkflow's claim (each bonus is then left for a person, never paid twice).")
@click.option("--prolific-contract", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Prolific's OpenAPI description the fake Prolific checks every call against "
                   "(default: the copy shipped in turkflow, turkflow/hits/prolific/publicapi/publicapi.yaml).")
@click.option("--keep", "keep_text", default="", metavar="any|session|SECONDS",
              help="Launch the simulated batch with batch launch --keep: whom a conversation's next turn of a role "
                   "goes to (any worker, the role's last writer while present, or for SECONDS).  [default: the "
                   "protocol's own]")
@click.option("--agent", "agent_roles", multiple=True, metavar="ROLE=NAME[,NAME...]",
              help="Agents play ROLE (Wizard of Tasks, local provider), as batch launch --agent: built-ins (sim-good, "
                   "sim-poor, sim-NN: right with probability 0.9, 0.5, NN/100) or fake, an endpoint agent answered by a "
                   "fake OpenAI-compatible server in this process; with --teachers 0 (or --students 0) the agents "
                   "play every turn of that role, judged by the simulated people. Several names: one drawn per "
                   "conversation (an A/B run); the report gives each agent's ratings and calls.")
@click.option("--fake-endpoint-delay", default=0.0, show_default=True,
              help="Seconds the fake endpoint takes to answer (--agent ROLE=fake).")
@click.option("--url", default=None,
              help="Use the web server already running here (with its Celery worker and TURKFLOW_* settings) "
                   "instead of starting one.")
@click.option("--database-url", default=None,
              help="Database of the stack started here (default: a fresh SQLite file in the run directory).")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the started stack's database and logs here (default: a temporary directory, removed).")
@click.option("--web-workers", default=3, show_default=True, help="gunicorn worker processes of the started stack.")
@click.option("--web-threads", default=4, show_default=True,
              help="Threads per gunicorn worker (more than 1: gthread workers, which keep connections alive).")
@click.option("--celery-concurrency", default=2, show_default=True, help="Celery worker processes of the started stack.")
@click.option("--settle-timeout", default=60.0, show_default=True,
              help="Give up when the pipeline has not opened the next turns for this many seconds.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help="Also write the whole report as JSON to this file ('-' for stdout, instead of the tables).")
@pass_app
def simulate(app: App, students: int, teachers: int, conversations: int, max_turns: int, mean_turns: Optional[int],
             spammers: float, lazy: float, careless: float, harsh: float, pasters: float, think_time: float,
             concurrency: int,
             seed: int, policy: Optional[str], compare_: tuple[str, ...], dialogs: Optional[Path],
             protocol: str, provider: str, prolific_time_outs: float, prolific_lost_pays: int,
             prolific_contract: Optional[Path], keep_text: str, url: Optional[str],
             database_url: Optional[str], run_dir: Optional[Path], web_workers: int, web_threads: int,
             celery_concurrency: int, settle_timeout: float, json_path: Optional[str], annotators: int,
             per_turn: int, gold: float, agent_roles: tuple[str, ...], fake_endpoint_delay: float,
             systems: int, votes: int, judges: int, pair_strategy: str) -> None:
    """Simulate a crowd working a batch through the real stack, and report.

    Starts redis-server, gunicorn and a Celery worker on a fresh database (or uses --url), invites the
    simulated workers, launches a batch on the local provider and has the crowd take, read and submit
    turns over HTTP. Honest workers replay real dialogs (SGD: USER lines for students, SYSTEM lines for
    teachers); the shares of spammers, lazy writers, careless and harsh raters are per role. Every
    worker has a hidden true quality; the report judges the quality monitor against it and replays the
    collected ratings under other policies.

    With --protocol star the batch is STAR's: users replay STAR's sample dialogues (--dialogs
    ../shared/data/star) or dialogues generated on turkflow's sample STAR tasks; wizards run the
    sample's queries, pick the replies the page offers and sometimes write their own; both answer the
    end-of-dialog questions. STAR has no peer ratings: the monitor judges its workers by their
    written turns' content, the wizard's agreement with the knowledge base and the flow chart, and the other
    role's end-of-dialog answers (judged m of n).

    With --provider prolific the batch runs on Prolific, played by a fake Prolific in this process that
    checks every call against Prolific's contract: the batch's studies are created through the real
    provider, and each participant starts a submission, writes the turn our study link gives them and
    completes the submission with the code they are sent back with (one at a time within a round).

    The same seed gives the same turns, ratings, blocks, bonuses and money ("reproducible" in --json);
    times, throughput and latency are measured and vary from run to run.

    \b
    Examples:
      turkflow simulate --conversations 20
      turkflow simulate --conversations 549 --students 200 --teachers 200 --mean-turns 33 --max-turns 60
      turkflow simulate --policy k=6,p=0.4 --compare k=5,p=0.5 --compare k=8,p=0.4 --json report.json
      turkflow simulate --policy recommended --careless 0.1 --harsh 0.05 --pasters 0.1
      turkflow simulate --provider prolific --conversations 4 --students 3 --teachers 3
      turkflow simulate --provider prolific --prolific-time-outs 0.2 --prolific-lost-pays 1
      turkflow simulate --protocol star --conversations 20 --seed 3
      turkflow simulate --protocol annotate --conversations 6 --annotators 10 --careless 0.3
      turkflow simulate --agent teacher=sim-good,sim-poor --teachers 0 --conversations 20
      turkflow simulate --protocol compare --systems 4 --votes 400 --careless 0.2 --seed 1 --json report.json
    """
    from turkflow.quality.monitor import Policy
    from turkflow.simulator.annotate import AnnotateConfig
    from turkflow.simulator.compare import CompareConfig
    from turkflow.simulator.run import SimulationConfig, run_on

    settings = app.settings
    if protocol == "compare":
        _compare(settings, CompareConfig(
            systems=systems, votes=votes, judges=judges, careless=careless, strategy=pair_strategy, seed=seed,
            **({"policy": policy} if policy else {})), database_url, run_dir, json_path)
        return
    if protocol == "annotate":
        _annotate(settings, AnnotateConfig(
            conversations=conversations, annotators=annotators, careless=careless, per_turn=per_turn, gold=gold,
            seed=seed, **({"policy": policy} if policy else {})), database_url, run_dir, json_path)
        return
    config = SimulationConfig(
        students=students, teachers=teachers, conversations=conversations, max_turns=max_turns,
        mean_turns=mean_turns, mix={"spammer": spammers, "lazy": lazy, "careless": careless, "harsh": harsh,
                                          "paster": pasters},
        think_time=think_time, concurrency=concurrency, seed=seed,
        policy=policy or Policy.of_settings(settings).text,
        compare=compare_ or DEFAULT_POLICIES, bonus_above=settings.bonus_above,
        bonus_cents=settings.bonus_cents, reward_cents=settings.reward_cents,
        settle_timeout=settle_timeout, dialogs=dialogs, provider=provider, protocol=protocol,
        prolific_time_outs=prolific_time_outs, prolific_lost_pays=prolific_lost_pays, keep=keep_text,
        agents=_agents(agent_roles), fake_endpoint_delay=fake_endpoint_delay,
    )
    with progress_bar() as bar:
        task = bar.add_task("simulating", total=None, detail="")

        def progress(done: int, planned: int) -> None:
            bar.update(task, completed=done, total=planned, detail="turns")

        if url:
            report = run_on(settings, url.rstrip("/"), config, progress)
        else:
            report = _with_own_stack(settings, config, database_url, run_dir, web_workers, web_threads,
                                     celery_concurrency, progress, prolific_contract)
    if json_path:
        text = json.dumps(report, indent=2, default=str)
        if json_path == "-":
            click.echo(text)
            return
        Path(json_path).write_text(text + "\n")
    show(report)


def _agents(given: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    played = {}
    for option in given:
        role, _, names = option.partition("=")
        listed = tuple(n.strip() for n in names.split(",") if n.strip())
        if not listed or not role.strip():
            raise click.UsageError(f"--agent {option!r}: give ROLE=NAME[,NAME...]")
        played[role.strip()] = listed
    return played


def _annotate(settings: Settings, config: AnnotateConfig, database_url: Optional[str], run_dir: Optional[Path],
              json_path: Optional[str]) -> None:
    """The annotation simulation on its own database (a fresh SQLite file unless --database-url), reported."""
    from turkflow.simulator.annotate import run as run_annotation

    report = _in_own_database(settings, database_url, run_dir, lambda own: run_annotation(own, config))
    if _written(report, json_path):
        return
    batch, shown, data, seen = report["batch"], report["agreement"], report["dataset"], report["monitor"]
    click.echo(f"{batch['annotations']} annotations of {batch['units']} turns ({config.per_turn} a turn, "
               f"{data['gold_turns']} gold); {shown['majority']} turns agreed by a majority, "
               f"{shown['waiting_for_a_person']} waiting for a person.")
    click.echo(f"Dataset: {data['turns_correct']} of {data['turns_scored']} non-gold turns labelled as the truth "
               f"({data['turns_with_labels']} with labels).")
    click.echo(f"Monitor {seen['policy']}: blocked {seen['blocked']} annotators, {seen['careless_blocked']} of the "
               f"{seen['careless']} careless; precision {_pct(seen['precision'])}, recall {_pct(seen['recall'])}.")
    table("Agreement per label (Krippendorff's alpha)", ["label", "alpha", "share given"],
          [(row["label"], "undefined" if row["alpha"] is None else f"{row['alpha']:.3f}",
            _pct(row["share_with_label"])) for row in shown["labels"]])


def _compare(settings: Settings, config: CompareConfig, database_url: Optional[str], run_dir: Optional[Path],
             json_path: Optional[str]) -> None:
    """The side-by-side simulation on its own database (a fresh SQLite file unless --database-url), reported."""
    from turkflow.simulator.compare import run as run_comparison

    report = _in_own_database(settings, database_url, run_dir, lambda own: run_comparison(own, config))
    if _written(report, json_path):
        return
    done = report["reproducible"]
    click.echo(f"{done['votes']} votes counted ({done['votes_left_out']} of blocked judges left out) and "
               f"{done['known_answer_pairs']} known-answer pairs ({done['known_answer_right']} answered right).")
    click.echo(f"Ranking against the true order {' > '.join(done['true_order'])}: Kendall's tau "
               f"{done['kendall_tau']:.2f}.")
    click.echo(f"Monitor {config.policy}: careless and one-sided judges caught within their first 10 votes: "
               f"{_pct(done['careless_caught_share'])}; honest judges blocked: {_pct(done['honest_blocked_share'])}.")
    table("Judges (hidden truth)", ["judge", "behaviour", "accuracy", "bias", "votes", "known-answer",
                                     "quiz attempts", "blocked after votes"],
          [(j["judge"], j["behaviour"], j["accuracy"], j["bias"], j["votes"], j["known_answer"], j["quiz_attempts"],
            "" if j["blocked_after_votes"] is None else j["blocked_after_votes"]) for j in done["judges"]])


def _in_own_database(settings: Settings, database_url: Optional[str], run_dir: Optional[Path],
                     simulate: Callable[[Settings], dict[str, Any]]) -> dict[str, Any]:
    """Run an in-process simulation on its own database (a fresh SQLite file unless --database-url); a bad
    configuration is a usage error."""
    directory = run_dir or Path(tempfile.mkdtemp(prefix="turkflow-simulate-"))
    try:
        own = Settings(**{**settings.model_dump(), "data_dir": directory, "database_url": database_url or
                          f"sqlite:///{(directory / 'turkflow.db').resolve()}"})
        try:
            return simulate(own)
        except ValueError as bad:
            raise click.UsageError(str(bad)) from None
    finally:
        if run_dir is None:
            shutil.rmtree(directory, ignore_errors=True)


def _written(report: dict[str, Any], json_path: Optional[str]) -> bool:
    """Write the report as JSON to --json's file; True when it went to stdout instead of the tables."""
    if not json_path:
        return False
    text = json.dumps(report, indent=2)
    if json_path == "-":
        click.echo(text)
        return True
    Path(json_path).write_text(text + "\n")
    return False


def _with_own_stack(settings: Settings, config: SimulationConfig, database_url: Optional[str],
                    run_dir: Optional[Path], web_workers: int, web_threads: int, celery_concurrency: int,
                    progress, prolific_contract: Optional[Path]) -> dict[str, Any]:  # noqa: ANN001
    from turkflow.simulator.run import run_with_stack

    directory = run_dir or Path(tempfile.mkdtemp(prefix="turkflow-simulate-"))
    try:
        own = Settings(**{**settings.model_dump(), "data_dir": directory, "database_url": database_url or
                          f"sqlite:///{(directory / 'turkflow.db').resolve()}", "secret_key": "",
                          "worker_hash_key": ""})
        return run_with_stack(own, directory, config, web_workers=web_workers, web_threads=web_threads,
                              celery_concurrency=celery_concurrency, progress=progress,
                              prolific_contract=prolific_contract)
    finally:
        if run_dir is None:
            shutil.rmtree(directory, ignore_errors=True)


def show(report: dict[str, Any]) -> None:
    """The report as tables: the crowd, money, the monitor against the truth, the policies, the timings."""
    from turkflow.simulator.policies import EARLY_RATED_TURNS, EARLY_WRITTEN_TURNS, IDENTIFIED_RATINGS

    done = report["reproducible"]
    measured = report["measured"]
    turns = done["turns"]
    conversations = done["conversations"]
    click.echo(f"{turns['stored']} turns stored of {turns['planned']} planned in {conversations['completed']}/"
               f"{conversations['launched']} completed conversations over {done['rounds']} rounds "
               f"({done['stop_reason']}); lost {turns['lost']}, unexpected {turns['unexpected']}, "
               f"history mismatches {turns['history_mismatches']}.")
    click.echo(f"{measured['wall_seconds']} s wall time, {measured['turns_per_second']} turns/s.")
    same, waited = done["same_worker"], measured["submit_to_next_turn_taken_ms"]
    click.echo(f"Same worker: {_pct(same['most_frequent_worker_share'])} of each conversation's role turns written by "
               f"its most frequent worker ({same['workers_per_conversation_role']} workers per conversation role); "
               f"a written turn's next turn taken after {waited['p50']} ms (p50), {waited['p95']} ms (p95).")
    if "star" in done:
        star = done["star"]
        events = star["events"]
        click.echo(f"STAR: {star['star_turns']} STAR turns ({star['star_turns_in_complete_dialogs']} in "
                   f"{star['complete_dialogs']} complete dialogs); {events.get('Wizard query', 0)} queries "
                   f"({star['queries_found_nothing']} found nothing), "
                   f"{events.get('Wizard pick_suggestion', 0)} replies picked, "
                   f"{events.get('Wizard utter', 0)} written; questionnaires answered: "
                   f"{', '.join(f'{n} {role}' for role, n in star['surveys_answered'].items()) or 'none'}.")
    for name in PLAYED:
        if name != "star" and done.get(name, {}).get("summary"):
            click.echo(f"{name}: {done[name]['summary']}")
    if "prolific" in report:
        seen = report["prolific"]
        checked = (f"checked against {seen['contract']}: {seen['violations']} contract violations"
                   if seen["checked"] else f"not checked against its contract: {seen['unchecked_because']}")
        click.echo(f"Prolific (fake): {seen['calls']} API calls, {checked}; submissions "
                   f"{', '.join(f'{n} {status}' for status, n in seen['submissions'].items()) or 'none'}.")
        click.echo(f"Prolific participants qualified by {seen['qualified_by']}.")
        for violation in seen["violation_details"]:
            click.echo(f"  contract violation: {violation}")
    if "prolific_settlement" in done:
        paid = done["prolific_settlement"]
        click.echo(f"Prolific pay: {paid['turns_paid_once']} of {paid['turns_stored']} stored turns paid exactly once "
                   f"({', '.join(f'{n} {way}' for way, n in paid['turns_by_way'].items())}; "
                   f"{paid['turns_timed_out_after_writing']} timed out after writing), "
                   f"{paid['turns_paid_more_than_once']} paid more than once, {paid['turns_unpaid']} unpaid; "
                   f"bonuses: {', '.join(f'{n} {what}' for what, n in paid['bonuses_by_outcome'].items()) or 'none'}.")
        for left in report.get("prolific_left_for_a_person", []):
            click.echo(f"  left for a person (`turkflow prolific bonuses`): bonus {left['bonus']} ({left['kind']}, "
                       f"{dollars(left['amount_cents'])}): {left['reason']}")
    for message in done["stalled"]:
        click.echo(f"stalled: {message} (the batch cannot finish; compare policies with --compare)")
    table("Crowd (hidden truth)", ["behaviour", "workers", "turns", "blocked", "earned"],
          [(name, row["workers"], row["turns"], row["blocked"], dollars(row["earned_cents"]))
           for name, row in done["crowd"].items()])
    money = done["money"]
    table("Money", ["rewards", "bonuses", f"Prolific fee ({money['fee_percent']:g}%)", "total",
                    "paid to bad workers", "to bad writers"],
          [(dollars(money["rewards_cents"]), dollars(money["bonuses_cents"]), dollars(money["fees_cents"]),
            dollars(money["total_cents"]), _pct(money["share_paid_to_bad_workers"]),
            _pct(money["share_paid_to_bad_writers"]))])
    monitor = done["monitor"]
    click.echo(f"Live monitor {monitor['policy']}: median {monitor['median_turns_written_before_block']} turns "
               f"written by a bad writer before their block; replay agrees with the live monitor: "
               f"{'yes' if monitor['replay_agrees_with_live_monitor'] else 'NO'}.")
    table(f"Policies on the collected ratings (targets: honest blocked ≤1%, spammers blocked within "
          f"{EARLY_RATED_TURNS} rated turns ≥95%, careless and harsh raters identified within "
          f"{IDENTIFIED_RATINGS} ratings ≥90%, pasters within {EARLY_WRITTEN_TURNS} written turns ≥95%, "
          "pay to spammers and pasters ≤3%, estimated in replays)",
          ["policy", "blocked", "honest blocked", "spammers early", "raters identified", "pasters early",
           "pay to spammers+pasters", "bonuses", "undetermined", "target"],
          [(e["policy"], e["blocked"], f"{e['honest_blocked']} ({_pct(e['honest_blocked_share'])})",
            f"{e['spammers_blocked_early']} ({_pct(e['spammers_blocked_early_share'])})",
            f"{e['careless_detected']} ({_pct(e['careless_detected_share'])})",
            f"{e['pasters_caught_early']} ({_pct(e['pasters_caught_early_share'])})",
            _pct(e["share_paid_to_spammers_and_pasters"]), dollars(e["bonus_cents"]), e["undetermined"],
            "met" if e["meets_target"] else "missed: " + ", ".join(e["misses"])) for e in done["policies"]])
    if any(e["undetermined"] for e in done["policies"]):
        click.echo("Undetermined: workers the live policy blocked before that policy decided about them; "
                   "simulate with --policy none to compare every policy on complete ratings.")
    latency = measured["submit_to_next_hit_open_ms"]
    table("Submit to next HIT open (ms)", ["measured from", "n", "p50", "p95", "p99", "max"],
          [(name, row["n"], row["p50"], row["p95"], row["p99"], row["max"]) for name, row in latency.items()])
    http = measured["http"]
    table(f"HTTP ({http['requests']} requests, errors: {http['errors'] or 'none'})",
          ["route", "requests", "p50 ms", "p95 ms", "p99 ms"],
          [(route, row["requests"], row["p50_ms"], row["p95_ms"], row["p99_ms"])
           for route, row in http["routes"].items()])
    if done["revised_answers"]:
        click.echo(f"Answers the turn page refused and the worker rewrote (by field): {done['revised_answers']}")
    if done["refused_requests"]:
        click.echo(f"Refused requests (their turns went back to the pool): {done['refused_requests']}")


def _pct(share: Optional[float]) -> str:
    return "n/a" if share is None else f"{share:.0%}" if share in (0, 1) else f"{share:.1%}"
