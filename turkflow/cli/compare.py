"""``turkflow batch launch --protocol compare``: judges compare finished dialogs of other batches side by side;
``turkflow compare report``: the systems ranked, with intervals, the pairs' tests, position bias and the judges."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Optional

import click

from turkflow.cli.common import CONTEXT, App, CommandError, find_batch, pass_app, table


def launch_comparison(app: App, *, of: list[int], question: Optional[str], judges: Optional[int], strategy: str,
                      reward: Optional[int], name: Optional[str], budget: Optional[int], provider: str,
                      policy_text: Optional[str], dry_run: bool, owner: Optional[int] = None
                      ) -> Optional[tuple[int, list[int]]]:
    """Check and launch (for the requester ``owner``, else the operator); returns the new batch and its HITs (to
    publish), None on a dry run."""
    from turkflow.hits import money
    from turkflow.protocols.compare import dialog as compare
    from turkflow.quality import monitor

    if not of or not question or judges is None:
        raise CommandError("--protocol compare needs --of BATCH[,BATCH...] (the batches whose dialogs to compare), "
                           "--question TEXT and --judges N (votes per pair of systems)")
    if provider != "local":
        raise CommandError("comparison batches run on --provider local")
    settings = app.settings
    reward = reward if reward is not None else settings.reward_cents
    try:
        policy = monitor.Policy.parse(policy_text or settings.compare_policy, settings.bonus_above, 0)
    except monitor.PolicyError as bad:
        raise CommandError(f"--policy: {bad}") from None
    with app.session() as session:
        for batch_id in of:
            find_batch(session, batch_id)
        options = compare.plan(session, of)
    systems = sorted({s for pair in options for s in pair})
    votes = judges * len(options)
    cost = money.estimate(provider, votes, 1, reward, 0, budget_cents=budget)
    name = name or f"side by side of batches {', '.join(map(str, of))} {datetime.now().strftime('%Y-%m-%d %H:%M')}"
    click.echo(f"batch \"{name}\": {votes} votes ({judges} per pair of systems, drawn {strategy}) on "
               f"{len(options)} pairs of {len(systems)} systems: {', '.join(systems)}")
    click.echo(f"at {money.shown(reward, 'USD')} a judgement: at least {money.shown(cost.total_cents, 'USD')}, more "
               f"with the known-answer pairs (one before each of a judge's first {settings.compare_probation} votes, "
               f"then one in {settings.compare_gold_every})")
    click.echo(f"quality policy: {policy.text} (judges are judged by their known-answer pairs)")
    if dry_run:
        return None
    with app.session() as session:
        batch, hits = compare.launch(session, of, question, judges, strategy=strategy,
                                     probation=settings.compare_probation, gold_every=settings.compare_gold_every,
                                     name=name, provider=provider, reward_cents=reward, budget_cents=budget,
                                     quality=policy.batch_fields(), requester_id=owner)
        batch_id, hit_ids = batch.id, [h.id for h in hits]
    return batch_id, hit_ids


@click.group(context_settings=CONTEXT)
def compare() -> None:
    """Side-by-side comparisons: the systems ranked from the judges' votes."""


@compare.command("report", context_settings=CONTEXT)
@click.argument("batch_id", type=int)
@click.option("--blocked", is_flag=True, help="Count the votes of blocked judges too (left out by default).")
@click.option("--rounds", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Bootstrap resamples behind the intervals.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_app
def compare_report(app: App, batch_id: int, blocked: bool, rounds: int, as_json: bool) -> None:
    """The systems of a comparison batch ranked by a Bradley-Terry fit with ties and 95% bootstrap intervals;
    each pair's wins, losses, ties and exact binomial test (Holm-corrected); the share of decisive votes for
    the left dialog; and each judge's votes, known-answer pairs and agreement with the other judges."""
    from turkflow.protocols.compare import report

    with app.session() as session:
        batch = find_batch(session, batch_id)
        if batch.protocol != "compare":
            raise CommandError(f"batch {batch_id} is a {batch.protocol} batch, not a comparison batch")
        shown = report.batch_report(session, batch_id, rounds=rounds, include_blocked=blocked)
    if as_json:
        click.echo(json.dumps(shown, indent=2))
        return
    votes = shown["votes"]
    click.echo(f"\"{shown['batch']['question']}\": {votes['counted']} votes counted of "
               f"{shown['batch']['votes_planned']}" + (f", {votes['left_out_blocked']} of blocked judges left out"
                                                       if votes["left_out_blocked"] else "")
               + f"; {votes['known_answer_right']} of {votes['known_answer']} known-answer pairs answered right")
    table(f"Ranking (Bradley-Terry with ties; {shown['level']:.0%} bootstrap intervals, {rounds} resamples)",
          ["rank", "system", "strength", "interval", "votes"],
          [(r["rank"], r["system"], f"{r['strength']:+.2f}",
            "no votes yet" if r["low"] is None else f"{r['low']:+.2f} to {r['high']:+.2f}", r["votes"])
           for r in shown["ranking"]])
    table("Pairs (exact binomial test of decisive votes, Holm-corrected)",
          ["system", "against", "wins", "losses", "ties", "win rate", "p (Holm)"],
          [(p["a"], p["b"], p["a_wins"], p["b_wins"], p["ties"],
            "n/a" if p["a_win_rate"] is None else f"{p['a_win_rate']:.0%}",
            "n/a" if p["p_holm"] is None else f"{p['p_holm']:.3g}" + (" *" if p["significant"] else ""))
           for p in shown["pairs"]])
    position = shown["position"]
    if position["left_share"] is not None:
        click.echo(f"position bias: the left dialog picked in {position['left_share']:.0%} of "
                   f"{position['decisive_votes']} decisive votes ({shown['level']:.0%} interval "
                   f"{position['low']:.0%} to {position['high']:.0%})")
    table("Judges", ["judge", "status", "votes", "known-answer right", "agreement", "left picks"],
          [(j["judge"], j["status"], j["votes"], f"{j['known_answer_right']} of {j['known_answer']}",
            "n/a" if j["agreement"] is None else f"{j['agreement']:.0%} of {j['compared']}",
            "n/a" if j["left_share"] is None else f"{j['left_share']:.0%}") for j in shown["judges"]])
