"""The commands: each reads what it needs through the Context and prints a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TextIO

from botocore.exceptions import ClientError

from medic.ledger.modes import ModeChange, ModeStore
from medic.ledger.nodes import NodeStore
from medic.ledger.overview import read_overview
from medic_cli import agents, coverage, ledger_view, paging, pauses, preconditions, quarantine
from medic_cli import history as hist
from medic_cli.context import CliError, Context
from medic_cli.explain import explain
from medic_cli.mode import read_mode, set_mode
from medic_cli.render import json_block, json_line, table, when

RECENT_ACTIONS_SHOWN = 20


def run(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    if args.command == "backtest":
        from medic_cli import backtest  # imports the replay emulator: only for this command

        return backtest.command(args, ctx, out, err)
    if args.command == "validate":
        from medic_cli import validate  # imports the stack's config checks (infra/config.py)

        return validate.command(args, ctx, out, err)
    if args.command == "stream-failures":
        from medic_cli import stream_failures

        return stream_failures.command(args, ctx, out, err)
    handler = {"status": status, "history": history, "report": report_command, "pause": pause, "resume": resume,
               "mode": mode, "explain": explain_command, "test-page": test_page_command,
               "release": release_command}[args.command]
    return handler(args, ctx, out, err)


# --- status

def status(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    now = ctx.now()
    since = hist.parse_since(args.since, now)
    reading = read_mode(ctx)
    last = ModeStore(ctx.ledger()).changes(ctx.stack, limit=1)
    overview = read_overview(ctx.ledger())
    config = ctx.config
    incidents = ledger_view.open_incidents(overview, lambda name: ledger_view.guardrails_for(config, name), now)
    actions = ledger_view.recent_actions(overview, since)
    dry_run = reading.effective == "dry_run"
    budgets = ledger_view.budgets(overview, config, now, dry_run=dry_run)
    clusters = preconditions.read(ctx, config) if config is not None else []
    paused = pauses.read(ctx)
    agent_lines = agents.read(ctx.ledger(), config, now) if config is not None else []
    quarantined = quarantine.read(ctx, config)
    watched = _coverage(ctx, now, err)
    topic = ctx.outputs.get("PagingTopicArn")
    subscribed = paging.subscriptions(ctx, topic) if topic else None

    if args.json:
        print(json_block({
            "stack": ctx.stack, "mode": reading.effective, "mode_value": reading.value,
            "mode_parameter": reading.parameter,
            "last_mode_change": ledger_view.mode_change_json(last[0]) if last else None,
            "pauses": [pauses.pause_json(one, now) for one in paused],
            "ledger_table": ctx.table, "config": ctx.loaded_config.source,
            "open_incidents": incidents, "recent_actions": actions, "budgets_ledger": "dry_run" if dry_run else "real",
            "budgets": [budget.as_json() for budget in budgets],
            "preconditions": [cluster.as_json() for cluster in clusters],
            "agents": [line.as_json() for line in agent_lines],
            "quarantined": [quarantine.as_json(one) for one in quarantined],
            "watched": [line.as_json() for line in watched] if watched is not None else None,
            "paging": subscribed.as_json() if subscribed else None}), file=out)
        return 0

    stored = "" if reading.value == reading.effective else f"  (parameter holds {reading.value!r}: read as paused)"
    lines = [f"Medic stack {ctx.stack}  (ledger {ctx.table})",
             f"Mode:         {reading.effective}{stored}  [{reading.parameter}]",
             f"Last change:  {_change_text(last[0]) if last else 'none recorded by medic'}",
             *_paused_lines(paused, now),
             f"Config:       {ctx.loaded_config.source}", ""]
    lines.append(f"Open incidents: {len(incidents)}")
    if incidents:
        lines.append(_indent(table(("incident", "since (UTC)", "state"),
                                   [(i["incident"], i["since"], "; ".join(i["states"])) for i in incidents])))
    lines += ["", f"Recent actions since {when(since)} UTC: {len(actions)} (the ledger keeps each node's last "
                  "action and job restarts; `medic history` shows every decision)"]
    if actions:
        shown = actions[:RECENT_ACTIONS_SHOWN]
        lines.append(_indent(table(("time (UTC)", "cluster", "node/job", "action", "fault", "outcome", "try"),
                                   [(a["at"], a["cluster"], a["subject"], a["action"], a["fault"], a["outcome"],
                                     a["attempt"]) for a in shown])))
        if len(actions) > len(shown):
            lines.append(f"  ... and {len(actions) - len(shown)} more (--json for all)")
    copy = {"dry_run": " (the dry-run copy: mode is dry_run)",
            "paused": " (paused: no node action is taken whatever is left)"}.get(reading.effective, "")
    if config is None:
        copy += " (default guardrails: no config)"
    lines += ["", f"Guardrail budgets, rolling hour{copy}:"]
    if budgets:
        lines.append(_indent(table(
            ("cluster", "used", "max/hour", "left", "in repair", "next frees (UTC)"),
            [(b.cluster, b.used, b.limit, b.left, f"{b.in_repair} in {b.repair_minutes} min", b.next_free_at)
             for b in budgets])))
    else:
        lines.append("  no clusters (pass --config medic.yaml to list the configured clusters)")
    lines += ["", "Cluster preconditions (DescribeCluster; docs/deploy.md \"Before you deploy\"):"]
    if not clusters:
        lines.append("  no config: pass --config medic.yaml to check the configured clusters")
    for cluster in clusters:
        lines.append(f"  {cluster.cluster}  ({cluster.summary})")
        lines += [f"    {check.state:<8} {check.name:<19} {check.detail}" for check in cluster.checks]
    lines += ["", "Agents (last heartbeat by DynamoDB's clock; host and version as each agent says, quoted):"]
    if config is None:
        lines.append("  no config: pass --config medic.yaml to list each cluster's agent")
    elif agent_lines:
        lines.append(_indent(table(("cluster", "role", "state", "host", "version", "last heartbeat (UTC)", "detail"),
                                   [(a.cluster, a.role, a.state, a.host, a.version,
                                     when(a.last_heartbeat) + ("" if a.clock == "DynamoDB" else " (its clock)"),
                                     a.detail) for a in agent_lines])))
    lines += quarantine.lines(quarantined, config)
    lines += ["", *_coverage_lines(watched)]
    lines += ["", "Paging (the topic's subscriptions; `medic test-page` sends a test page):"]
    lines += subscribed.lines() if subscribed else ["  no PagingTopicArn output: cannot list the subscriptions"]
    print("\n".join(lines), file=out)
    return 0


def _coverage(ctx: Context, now: datetime, err: TextIO) -> list | None:
    """What Medic watches now (issue 33); None without a config, or when CloudWatch cannot say (on stderr)."""
    if ctx.config is None:
        return None
    try:
        return coverage.read(ctx.client("cloudwatch"), ctx.ledger(), ctx.config, now)
    except ClientError as error:
        print(f"medic: watched runs unavailable ({error.response.get('Error', {}).get('Code')})", file=err)
        return None


def _coverage_lines(watched: list | None) -> list[str]:
    lines = ["Watched (jobs[] entries, and the runs watch rules cover now: their last 3 h of Run reports):"]
    if watched is None:
        return [*lines, "  no config, or CloudWatch unreadable: pass --config medic.yaml"]
    if not watched:
        return [*lines, "  nothing: no jobs[] entry, and no run matches a watch rule"]
    return [*lines, _indent(table(
        ("cluster", "job", "watched by", "run", "state", "last step", "at (UTC)", "restarts"),
        [(w.cluster, w.job, w.by, w.run, w.state, w.last_step, when(w.last_step_at) if w.last_step_at else "-",
          f"{w.restarts}/{w.max_restarts}") for w in watched]))]


def _paused_lines(paused: list, now: datetime) -> list[str]:
    """What operators paused (`medic pause`): each pause still on, and each that ended in the last week."""
    if not paused:
        return ["Paused:       nothing (medic pause)"]
    return [f"{'Paused:' if i == 0 else '':<14}{pauses.pause_text(one, now)}" for i, one in enumerate(paused)]


# --- test-page

def test_page_command(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    topic = paging.topic_arn(ctx)
    who = ctx.caller_arn()
    message_id = paging.test_page(ctx, topic, who, ctx.now(), args.note)
    subscribed = paging.subscriptions(ctx, topic)
    confirmed = len(subscribed.found) - len(subscribed.pending)
    if args.json:
        print(json_block({"message_id": message_id, "sent_by": who, **subscribed.as_json(),
                          "confirmed": confirmed}), file=out)
    else:
        print("\n".join([f"Test page published to {topic} (SNS message {message_id}), marked TEST, sent by {who}.",
                         "Subscriptions:", *subscribed.lines()]), file=out)
    return 0 if confirmed else 1


def _change_text(change: ModeChange) -> str:
    reason = f": {change.reason!r}" if change.reason else ""
    return f"{when(change.at)} UTC {change.previous or '?'} -> {change.mode} by {change.who}{reason}"


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


# --- history

def history(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    now = ctx.now()
    since_text = args.since or (None if args.from_file else "24h")
    outcomes = hist.parse_outcomes(args.outcome)
    filters = hist.Filters(since=hist.parse_since(since_text, now) if since_text else None,
                           until=hist.parse_since(args.until, now) if args.until else None,
                           cluster=args.cluster, node=args.node, job=args.job, outcomes=outcomes,
                           whys=hist.parse_whys(args.why), needs_human=args.needs_human)
    if args.from_file:
        records = hist.from_file(args.from_file, filters)
    else:
        ctx.log_group_names = args.log_group or ctx.log_group_names
        records = hist.from_logs(ctx.client("logs"), ctx.log_groups, filters, warn=err)
    total = len(records)
    records = hist.newest(records, args.limit or None)
    if args.json:
        for record in records:
            print(json_line(hist.as_json(record)), file=out)
        return 0
    source = args.from_file if args.from_file else ", ".join(ctx.log_groups)
    window = f" since {when(filters.since)} UTC" if filters.since else ""
    print(f"Remediation records{window} from {source}", file=out)
    if records:
        print(hist.as_table(records), file=out)
    shown = f" (showing the newest {len(records)}; --limit)" if total > len(records) else ""
    print(hist.summary(records) + shown, file=out)
    if args.node and not args.from_file:
        print(_node_ledger_text(ctx, args.node, args.cluster or next(
            (r["cluster"] for r in reversed(records) if r.get("cluster")), None)), file=out)
    return 0


def _node_ledger_text(ctx: Context, node: str, cluster: str | None) -> str:
    """The ledger's memory of the node: what the next decision about it will see."""
    if not cluster:
        return f"Ledger, node {node}: pass --cluster to read its state"
    try:
        state, _ = NodeStore(ctx.ledger()).load(cluster, node)
    except (CliError, ClientError) as error:
        return f"Ledger, node {node}: not readable ({error})"
    if state is None:
        return f"Ledger, node {cluster}/{node}: no action remembered (none in the last 7 days)"
    reboot = f", last reboot {when(state.last_reboot_at)} UTC" if state.last_reboot_at else ""
    return (f"Ledger, node {cluster}/{node}: last {state.action} for {state.fault} at {when(state.acted_at)} UTC "
            f"({state.outcome}), attempt {state.attempt}{reboot}")


# --- report

def report_command(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    from medic_cli import report as rep

    now = ctx.now()
    since_text = args.since or (None if args.from_file else "7d")
    filters = rep.Filters(since=hist.parse_since(since_text, now) if since_text else None,
                          until=hist.parse_since(args.until, now) if args.until else None,
                          cluster=args.cluster, job=args.job)
    minutes = None
    if args.from_file:
        incidents, times = rep.from_file(args.from_file, filters)
        start = filters.since or (min(times) if times else now)
        end = filters.until or (max(times) if times else now)
        source = args.from_file
    else:
        ctx.log_group_names = args.log_group or ctx.log_group_names
        incidents = rep.from_logs(ctx.client("logs"), ctx.log_groups, filters, warn=err)
        start, end = filters.since or now, filters.until or now
        cloudwatch = ctx.client("cloudwatch")

        def minutes(job: str) -> int | None:
            try:
                return rep.probe_minutes(cloudwatch, job, start, end)
            except ClientError as error:
                print(f"medic: probe metrics of {job} unavailable ({error.response.get('Error', {}).get('Code')}):"
                      " goodput from its incidents", file=err)
                return None
        source = ", ".join(ctx.log_groups)
    result = rep.report(incidents, start, end, minutes) if minutes else rep.report(incidents, start, end)
    watched = None if args.from_file else _coverage(ctx, now, err)  # what Medic watches now (issue 33)
    if args.json:
        if watched is not None:
            result["watched"] = [line.as_json() for line in watched]
        print(json.dumps(result, sort_keys=False), file=out)
        return 0
    print(rep.as_text(result, source, top=args.top), file=out)
    if watched is not None:
        print("\n".join(["", *_coverage_lines(watched)]), file=out)
    return 0


# --- mode

def pause(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    """An operator's pause of some clusters (or the whole stack): a ledger item the functions read with the mode."""
    now = ctx.now()
    for one in pauses.pause(ctx, args.cluster, args.for_, args.reason):
        print(f"Paused: {pauses.pause_text(one, now)}", file=out)
    print(f"Recorded in {ctx.table}. The functions read it within 30 seconds: they record every decision on it and "
          "act on none, paging at most once per cluster per hour.", file=out)
    print("It ends by itself at its end (one page says so), or with medic resume; one set without --for pages once "
          "when it is still on after a day.", file=out)
    return 0


def release_command(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    """Return a node Medic quarantined to service: one "Medic Release Node" request (medic_cli/quarantine.py)."""
    print(quarantine.release(ctx, args.node, args.cluster, args.reason, ctx.now()), file=out)
    return 0


def resume(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    """End the pauses of --cluster (or all of them, and set the mode act, as ever)."""
    now = ctx.now()
    lifted = pauses.lift(ctx, args.cluster)
    for one in lifted:
        print(f"Resumed: {pauses.pause_text(one, now)}", file=out)
    if args.cluster:
        if not lifted:
            print(f"No pause held {', '.join(args.cluster)}; nothing changed.", file=out)
        return 0
    return _set(ctx, "act", args.reason, out)


def mode(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    if args.mode:
        return _set(ctx, args.mode, args.reason, out)
    reading = read_mode(ctx)
    stored = "" if reading.value == reading.effective else f" (parameter holds {reading.value!r}: read as paused)"
    print(f"Mode: {reading.effective}{stored}  [{reading.parameter}]", file=out)
    changes = ModeStore(ctx.ledger()).changes(ctx.stack, limit=max(args.last, 1))
    if changes:
        print(table(("changed at (UTC)", "from", "to", "by", "reason"),
                    [(c.at, c.previous, c.mode, c.who, c.reason) for c in changes]), file=out)
    else:
        print("No changes recorded by medic.", file=out)
    return 0


def _set(ctx: Context, new_mode: str, reason: str, out: TextIO) -> int:
    change, before = set_mode(ctx, new_mode, reason)
    if change is None:
        print(f"Mode is already {before.value} [{before.parameter}]; nothing changed.", file=out)
        return 0
    print(f"Mode: {change.previous} -> {change.mode}  [{before.parameter}]", file=out)
    print(f"Recorded in {ctx.table}: {json_line(ledger_view.mode_change_json(change))}", file=out)
    print("The functions read the new mode within 30 seconds.", file=out)
    return 0


# --- explain

def explain_command(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    try:
        raw = json.loads(sys.stdin.read() if args.event == "-" else Path(args.event).read_text())
    except OSError as error:
        raise CliError(f"cannot read {args.event}: {error.strerror}") from None
    except ValueError as error:
        raise CliError(f"{args.event} is not JSON: {error}") from None
    explanation = explain(ctx, raw, read_mode(ctx))
    if args.json:
        print(json_block(explanation.as_json()), file=out)
        return 0
    record = explanation.record
    subject = record.get("node_id") or record.get("job") or record.get("incident")
    about = " ".join(str(part) for part in (record.get("cluster"), subject) if part)
    lines = [f"Event {record['event_id']} ({record['trigger']}): {about}",
             *(f"  {label + ':':<14}{text}" for label, text in explanation.facts),
             "",
             f"Decision:  {record['action']} -> {record['outcome']}"
             + (f" (attempt {record['attempt']})" if record.get("attempt") else ""),
             f"Why:       {record['reason']}",
             f"Incident:  {record['incident']}",
             "Medic would:",
             *(f"  {i}. {step}" for i, step in enumerate(explanation.would, 1)),
             "",
             "Nothing was changed: explain only reads (no claim, no action, no page, no record)."]
    print("\n".join(lines), file=out)
    return 0
