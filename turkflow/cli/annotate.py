"""``turkflow batch launch --protocol annotate``: an annotation batch over a collected batch's turns, and
``turkflow annotate agreement``: how far its annotators agree, per label."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

import click

from turkflow.cli.common import CONTEXT, App, CommandError, find_batch, pass_app, table


def launch_annotation(app: App, *, of: Optional[int], scheme_ref: Optional[str], annotators: int,
                      reward: Optional[int], name: Optional[str], budget: Optional[int], provider: str,
                      policy_text: Optional[str], dry_run: bool, owner: Optional[int] = None
                      ) -> Optional[tuple[int, list[int]]]:
    """Check and launch (for the requester ``owner``, else the operator); returns the new batch and its HITs (to
    publish), None on a dry run. A bad scheme or batch is one line naming the option or the scheme's field."""
    from turkflow.hits import money
    from turkflow.protocols.annotate import dialog as annotate
    from turkflow.protocols.annotate.scheme import load_scheme
    from turkflow.quality import monitor

    if of is None or not scheme_ref:
        raise CommandError("--protocol annotate needs --of BATCH (the batch whose turns to label) and --scheme "
                           "(frames, or a scheme file)")
    if provider != "local":
        raise CommandError("annotation batches run on --provider local")
    scheme = load_scheme(scheme_ref)
    settings = app.settings
    reward = reward if reward is not None else settings.reward_cents
    try:
        policy = (monitor.Policy.parse(policy_text, settings.bonus_above, settings.bonus_cents) if policy_text
                  else monitor.Policy.of_settings(settings))
    except monitor.PolicyError as bad:
        raise CommandError(f"--policy: {bad}") from None
    with app.session() as session:
        source = find_batch(session, of)
        units = len(annotate.unit_tasks(session, source, scheme))
    cost = money.estimate(provider, units * annotators, 1, reward, 0, budget_cents=budget)
    name = name or f"annotation of batch {of} ({scheme.name}) {datetime.now().strftime('%Y-%m-%d %H:%M')}"
    click.echo(f"batch \"{name}\": {units} turns of batch {of}, each labelled by {annotators} annotators with the "
               f"{scheme.name} scheme, at {money.shown(reward, 'USD')} a label; at most {money.shown(cost.total_cents, 'USD')}")
    click.echo(f"quality policy: {policy.text} (annotators are judged against the majority and the gold turns: "
               f"judged {policy.judged_block} of {policy.judged_window})")
    if dry_run:
        return None
    with app.session() as session:
        batch, hits = annotate.launch(session, of, scheme, annotators, name=name, provider=provider,
                                      reward_cents=reward, budget_cents=budget, quality=policy.batch_fields(),
                                      requester_id=owner)
        batch_id, hit_ids = batch.id, [h.id for h in hits]
    return batch_id, hit_ids


@click.group(context_settings=CONTEXT)
def annotate() -> None:
    """Annotation batches: agreement of their annotators."""


@annotate.command("agreement", context_settings=CONTEXT)
@click.argument("batch_id", type=int)
@pass_app
def annotate_agreement(app: App, batch_id: int) -> None:
    """Krippendorff's alpha per label of an annotation batch, and its turns agreed, disagreed and decided."""
    from turkflow.protocols.annotate import results

    with app.session() as session:
        batch = find_batch(session, batch_id)
        if batch.protocol != "annotate":
            raise CommandError(f"batch {batch_id} is a {batch.protocol} batch, not an annotation batch")
        shown = results.batch_agreement(session, batch_id)
    click.echo(f"{shown['complete']} of {shown['units']} turns fully labelled: {shown['majority']} agreed by a "
               f"majority, {shown['disagreed']} not ({shown['waiting_for_a_person']} waiting for a person); "
               f"{shown['adjudicated']} decided by a person, {shown['gold']} gold")
    table("Agreement per label (Krippendorff's alpha, nominal)", ["label", "alpha", "turns", "share given"],
          [(row["label"], "undefined" if row["alpha"] is None else f"{row['alpha']:.3f}", row["turns"],
            f"{row['share_with_label']:.0%}") for row in shown["labels"]])
