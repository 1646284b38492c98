"""``turkflow agents``: declare the agents that can play a role (``batch launch --agent ROLE=NAME``), look at
them, and try one on a canned turn.

Registered on the main group by ``turkflow.cli.main``; errors are ``turkflow.cli.common``'s one line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import click
from turkflow.cli.common import CONTEXT, App, CommandError, find_batch, pass_app, table, when
from turkflow.config import default


@click.group(context_settings=CONTEXT)
def agents() -> None:
    """Agents (models) that play a role: declared once, stored in the database, so every process agrees.

    \b
    An OpenAI-compatible server (llama.cpp's llama-server, vLLM, Ollama, a hosted API):
      turkflow agents add tutor --endpoint http://127.0.0.1:8080/v1 --model local --timeout 30
    A Python function that takes the turn's view (a dict) and returns the answer (a dict):
      turkflow agents add mine --callable mylab.agents:teacher
    Built-ins need no declaration: star-suggest (STAR's wizard by its suggestion model), sim-good, sim-poor
    and sim-NN (simulated agents right with probability 0.9, 0.5, NN/100).
    """


@agents.command("add", context_settings=CONTEXT)
@click.argument("name")
@click.option("--endpoint", metavar="URL", help="Base URL of an OpenAI-compatible chat-completions server, "
              "e.g. http://127.0.0.1:8080/v1 (llama.cpp), http://127.0.0.1:8000/v1 (vLLM), "
              "http://127.0.0.1:11434/v1 (Ollama).")
@click.option("--model", metavar="M", help="The model the server answers with (with --endpoint).")
@click.option("--api-key-env", metavar="VAR", help="The environment variable holding the server's key; the key "
              "is never stored, and every agents-queue worker needs the variable set.")
@click.option("--callable", "target", metavar="package.module:function",
              help="A Python function taking the turn's view (a dict) and returning the answer (a dict).")
@click.option("--timeout", type=float, default=default("agent_timeout_seconds"), show_default=True,
              help="Seconds one call may take before it counts as timed out.")
@click.option("--temperature", type=float, help="Sampling temperature sent with every call (default: the server's).")
@click.option("--max-tokens", type=int, help="Most tokens an answer may have (default: the server's).")
@pass_app
def agents_add(app: App, name: str, endpoint: Optional[str], model: Optional[str], api_key_env: Optional[str],
               target: Optional[str], timeout: float, temperature: Optional[float], max_tokens: Optional[int]) -> None:
    """Declare an agent called NAME (an endpoint, a callable, or the built-in of that name)."""
    from turkflow.agents.registry import add_agent

    with app.session(create=True) as session:
        agent = add_agent(session, name, endpoint=endpoint, model=model, target=target, api_key_env=api_key_env,
                          timeout_seconds=timeout, temperature=temperature, max_tokens=max_tokens)
        kind = agent.kind
    click.echo(f"agent {name} added ({kind}); try it: turkflow agents test {name}; use it: turkflow batch launch "
               f"... --agent ROLE={name}")


@agents.command("list", context_settings=CONTEXT)
@click.option("--batch", "batch_id", type=int, metavar="BATCH", help="Count only this batch's agent turns.")
@pass_app
def agents_list(app: App, batch_id: Optional[int]) -> None:
    """Every declared agent with its turns answered and failed (or handed to people) and their tokens."""
    from sqlmodel import col, func, select

    from turkflow.models import Agent, AgentTurn, AgentTurnStatus, Conversation

    with app.session() as session:
        query = (select(AgentTurn.agent_id, AgentTurn.status, func.count(), func.sum(AgentTurn.prompt_tokens),
                        func.sum(AgentTurn.completion_tokens))
                 .join(Conversation, Conversation.id == AgentTurn.conversation_id)
                 .group_by(AgentTurn.agent_id, AgentTurn.status))
        if batch_id is not None:
            query = query.where(Conversation.batch_id == batch_id)
        counts = {(agent_id, status): (n, p or 0, c or 0) for agent_id, status, n, p, c in session.exec(query)}

        def summed(agent_id: int, *statuses: str, part: int = 0) -> int:
            return sum(counts.get((agent_id, status), (0, 0, 0))[part] for status in statuses)

        every = tuple(AgentTurnStatus)
        rows = [(a.name, a.kind, a.endpoint or a.target or "", a.model or "", a.structured or "",
                 summed(a.id, AgentTurnStatus.answered),
                 summed(a.id, AgentTurnStatus.failed, AgentTurnStatus.handed_over),
                 f"{summed(a.id, *every, part=1)} / {summed(a.id, *every, part=2)}")
                for a in session.exec(select(Agent).order_by(col(Agent.name)))]
    if not rows:
        click.echo("no agents declared; turkflow agents add NAME --endpoint URL --model M")
        return
    table(f"batch {batch_id}" if batch_id is not None else None,
          ["name", "kind", "endpoint or target", "model", "structured output", "turns answered", "turns failed",
           "tokens prompt / completion"], rows)


@agents.command("show", context_settings=CONTEXT)
@click.argument("name")
@pass_app
def agents_show(app: App, name: str) -> None:
    """One agent's declaration, and its calls by outcome with their tokens and latency."""
    from sqlmodel import func, select

    from turkflow.models import Agent, AgentCall

    with app.session() as session:
        agent = session.exec(select(Agent).where(Agent.name == name)).first()
        if agent is None:
            raise CommandError(f"no agent called {name!r} (turkflow agents list)")
        calls = session.exec(
            select(AgentCall.outcome, func.count(), func.sum(AgentCall.prompt_tokens),
                   func.sum(AgentCall.completion_tokens), func.avg(AgentCall.latency_ms))
            .where(AgentCall.agent_id == agent.id).group_by(AgentCall.outcome)).all()
        shown = {"name": agent.name, "kind": agent.kind, "endpoint": agent.endpoint, "model": agent.model,
                 "callable or built-in": agent.target, "key variable": agent.api_key_env,
                 "timeout (s)": agent.timeout_seconds, "temperature": agent.temperature,
                 "max tokens": agent.max_tokens, "structured output": agent.structured,
                 "declared": when(agent.created_at)}
    for label, value in shown.items():
        if value is not None:
            click.echo(f"{label}: {value}")
    if calls:
        table("Calls", ["outcome", "calls", "prompt tokens", "completion tokens", "mean latency (ms)"],
              [(o, n, p or 0, c or 0, f"{ms or 0:.0f}") for o, n, p, c, ms in calls])


@agents.command("test", context_settings=CONTEXT)
@click.argument("name")
@pass_app
def agents_test(app: App, name: str) -> None:
    """Call NAME once on a canned Wizard of Tasks teacher turn: its latency, tokens, the structured-output mode
    it answered in, and whether the answer passes the turn's validation."""
    from turkflow.agents import canned, registry
    from turkflow.agents.turns import remember_mode
    from turkflow.errors import AgentError, InvalidInput

    with app.session() as session:
        agent = registry.find_agents(session, [name])[0]
        session.expunge(agent)
    view, check = canned.teacher_turn()
    started = time.monotonic()
    try:
        reply = registry.player(agent).answer(view)
    except AgentError as error:
        raise CommandError(f"{name}: {error.outcome}: {error.message} "
                           f"(after {time.monotonic() - started:.2f} s)") from None
    seconds = time.monotonic() - started
    click.echo(f"latency: {seconds:.2f} s; tokens: {reply.prompt_tokens} prompt, {reply.completion_tokens} "
               f"completion; structured output: {reply.structured}")
    click.echo("answer: " + json.dumps(reply.answer, ensure_ascii=False)[:500])
    try:
        check(reply.answer)
    except InvalidInput as refused:
        raise CommandError(f"the answer would be refused: {refused.message}") from None
    with app.session() as session:
        remember_mode(session, agent.id, reply.structured)
    click.echo("valid: the turn would be stored")


@agents.command("report", context_settings=CONTEXT)
@click.argument("batch_id", type=int, required=False)
@click.option("--from", "from_path", type=click.Path(path_type=Path, exists=True),
              help="Compute the report from an export instead of the database: its evaluation.jsonl (or the "
                   "directory holding it), or a report written with --json.")
@click.option("--exclude-careless", is_flag=True,
              help="Leave out the answers of the judges found careless (they disagree with what is known more "
                   "often than an attentive judge would: a control agent's turns, success checked against the goal).")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Also write the report, with the conversations' records it was computed from, as JSON here.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Also draw each agent's figures with their intervals into this PNG.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap and the permutation tests.")
@click.option("--resamples", type=click.IntRange(min=100),
              help="Bootstrap resamples per interval (default: the statistics module's, 2000).")
@pass_app
def agents_report(app: App, batch_id: Optional[int], from_path: Optional[Path], exclude_careless: bool,
                  json_path: Optional[Path], plot_path: Optional[Path], seed: int, resamples: Optional[int]) -> None:
    """How the agents of BATCH_ID did (default: the newest batch): per role and agent, success checked against
    the goal and as people claim it, turns to success, people's ratings, failed calls and why, latency and
    tokens, each with its 95% interval (bootstrap over conversations); for two or more agents of a role, their
    differences with a permutation test, corrected for the number of pairs (Holm); and every judge, careless
    or not.

    \b
      turkflow agents report 12 --plot agents.png --json agents.json
      turkflow agents report 12 --exclude-careless
      turkflow agents report --from dataset/          # recomputed from an export's evaluation.jsonl
    """
    from turkflow.agents import evaluation, report

    options = report.Options(seed=seed, exclude_careless=exclude_careless,
                             **({"resamples": resamples} if resamples else {}))
    if from_path is not None:
        if batch_id is not None:
            raise CommandError("give BATCH_ID or --from, not both")
        found = evaluation.read_records(from_path)
        title = f"from {from_path}"
    else:
        with app.session() as session:
            batch = find_batch(session, batch_id)
            found = evaluation.batch_records(session, batch.id, app.settings.worker_hash_key)
            title = f"batch {batch.id} ({batch.name})"
        if not found:
            raise CommandError(f"no agent played in {title}; launch one with batch launch --agent ROLE=NAME")
    built = report.build(found, options)
    show_report(built, title)
    if json_path is not None:
        json_path.write_text(json.dumps({"report": built, "conversations": [r.as_dict() for r in found]},
                                        ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        click.echo(f"wrote {json_path}")
    if plot_path is not None:
        plot_path.write_bytes(report.plot(built))
        click.echo(f"wrote {plot_path}")


def show_report(built: dict, title: str) -> None:
    from turkflow.agents import report

    click.echo(f"Agents' report, {title}: {built['conversations']} conversations; 95% intervals over "
               "conversations (bootstrap), n = conversations with the figure")
    for role in built["roles"]:
        names = [a["agent"] + (" (control)" if a["control"] else "") for a in role["agents"]]
        table(f"{role['role']}: played by {', '.join(names)}", ["", *names],
              [["conversations (ended)", *(f"{a['conversations']} ({a['ended']})" for a in role["agents"])],
               *report.table_rows(role)])
        units = {name: unit for name, _, unit in report.MEASURES}
        rows = [[report.LABELS[measure], f"{d['a']} - {d['b']}", report.difference_text(d, units[measure]),
                 f"{d['p']:.4f}" if d["p"] is not None else "-", f"{d['p_adjusted']:.4f}"
                 if d["p_adjusted"] is not None else "-", "yes" if d["told_apart"] else "no"]
                for measure, found in role["differences"].items() for d in found]
        if rows:
            table(f"{role['role']}: differences (intervals and p corrected for the pairs)",
                  ["figure", "agents", "difference", "p", "p (Holm)", "told apart"], rows)
        failures = [[a["agent"], reason, n] for a in role["agents"] for reason, n in a["reasons"]]
        if failures:
            table(f"{role['role']}: failed calls, by reason", ["agent", "outcome: reason", "calls"], failures)
    careless = [j for j in built["judges"] if j["careless"]]
    click.echo(f"judges: {len(built['judges'])}, careless: {len(careless)}"
               + (f" (left out: {', '.join(built['excluded_judges'])})" if built["excluded_judges"] else
                  " (leave them out with --exclude-careless)" if careless else ""))
    if careless:
        table("careless judges", ["judge", "answers", "known", "wrong", "p"],
              [[j["judge"], j["answers"], j["known"], j["wrong"], j["p"]] for j in careless])
