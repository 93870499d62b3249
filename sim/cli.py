"""``python -m sim replay FILE [--config medic.yaml] [--fault SPEC]...`` and ``python -m sim demo``."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.cfn import SimError
from sim.contract import ContractViolation
from sim.faults import USAGE, FaultSpecError, parse_fault
from sim.scenario import DEMO_CONFIG, bundled, read_scenario

if TYPE_CHECKING:
    from sim.replay import ReplayResult


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description="Replay events through Medic locally.")
    commands = parser.add_subparsers(dest="command", required=True)
    replay = commands.add_parser("replay", help="replay a JSON Lines file; print records and pages as JSON Lines")
    replay.add_argument("file", help="JSON Lines: EventBridge events and {\"sim\": ...} directives ('-' = stdin)")
    replay.add_argument("--config", type=Path, help="Medic config (default: the file's '# config:' header, "
                                                    "else medic.yaml)")
    replay.add_argument("--fault", action="append", default=[], metavar="SPEC", help=USAGE)
    replay.add_argument("--quiet", action="store_true", help="discard the handlers' own log lines "
                                                             "(default: on stderr)")
    demo = commands.add_parser("demo", help="replay the bundled scenarios and print a table per scenario")
    demo.add_argument("scenarios", nargs="*", type=Path, help="scenario files (default: sim/scenarios/*.jsonl)")
    demo.add_argument("--config", type=Path, help="config for scenarios without a '# config:' header "
                                                  "(default: sim/scenarios/demo.medic.yaml)")
    args = parser.parse_args(argv)
    try:
        if args.command == "replay":
            return _replay(args)
        return _demo(args)
    except ContractViolation as error:
        # A handler sent, or the emulator answered, what AWS's service model does not allow.
        print(f"sim: contract: {error}", file=sys.stderr)
        return 3
    except (FaultSpecError, SimError, ValueError, OSError) as error:
        # Bad usage, config or template: the tool cannot run (ConfigError is a ValueError).
        print(f"sim: {error}", file=sys.stderr)
        return 2


def _replay(args: argparse.Namespace) -> int:
    from sim.replay import run

    if args.file == "-":
        lines, config, specs = sys.stdin.read().splitlines(), args.config, list(args.fault)
    else:
        scenario = read_scenario(Path(args.file))
        lines, config = scenario.lines, args.config or scenario.config
        specs = [*scenario.faults, *args.fault]  # --fault adds to the header's, or overrides the same operation
    faults = [parse_fault(spec) for spec in specs]  # check them all before the (slow) synth
    config = config or _default_config()

    def out(line: dict) -> None:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()

    result = run(lines, config, faults, out=out, err=sys.stderr, handler_output=None if args.quiet else sys.stderr)
    if result.skipped:
        # what the replay could not read was not replayed: its output is not the input's, so not a success
        print(f"sim: {result.skipped} input item(s) skipped (each named above by its line number); the replay is "
              "incomplete", file=sys.stderr)
        return 1
    return 0


def _default_config() -> Path:
    here = Path("medic.yaml")
    if here.is_file():
        return here
    from sim.synth import ROOT

    return ROOT / "medic.yaml"


def _demo(args: argparse.Namespace) -> int:
    from sim.replay import run

    verdicts: list[tuple[str, bool]] = []
    for path in args.scenarios or bundled():
        scenario = read_scenario(path)
        config = scenario.config or args.config or DEMO_CONFIG
        faults = [parse_fault(spec) for spec in scenario.faults]
        result = run(scenario.lines, config, faults, err=sys.stderr)
        passed, verdict = check_lines(scenario.checks, result)
        print(render(scenario.title, scenario.expect, result, config, scenario.faults) + "\n".join(verdict) + "\n")
        verdicts.append((scenario.title, passed))
    failed = [title for title, passed in verdicts if not passed]
    print(f"== {len(verdicts)} scenarios: {len(verdicts) - len(failed)} PASS, {len(failed)} FAIL ==")
    for title in failed:
        print(f"   FAIL: {title}")
    return 1 if failed else 0


def check_lines(checks: list[str], result: ReplayResult) -> tuple[bool, list[str]]:
    """Each of the scenario's checks against its replay (sim/expect.py), one line each, then PASS or FAIL: a
    scenario with no check, or with a check that cannot be read, fails."""
    from sim.expect import CheckSyntaxError, parse_check

    lines, failures = [], 0
    for source in checks:
        try:
            check = parse_check(source)
        except CheckSyntaxError as error:
            failures += 1
            lines.append(f"   check: {source}  -> FAIL: {error}")
            continue
        met, actual = check.evaluate(result)
        failures += not met
        lines.append(f"   check: {source}" + ("" if met else f"  -> FAIL: got {actual}"))
    met = len(checks) - failures
    if not checks:
        failures += 1
        lines.append("   check: none: a scenario says what it expects in '# check:' lines (sim/README.md, Checks)")
    if result.skipped:
        failures += 1
        lines.append(f"   input: {result.skipped} item(s) skipped (named on stderr): the replay is not the scenario's")
    lines.append(f"   {'PASS' if not failures else 'FAIL'} ({met} of {len(checks)} checks met)")
    return not failures, lines


# The calls that change something outside Medic, as the demo's summary counts them.
ACTION_CALLS = {"sagemaker:BatchRebootClusterNodes": "BatchRebootClusterNodes",
                "sagemaker:BatchReplaceClusterNodes": "BatchReplaceClusterNodes",
                "sagemaker:CreateTrainingJob": "CreateTrainingJob",
                "sqs:SendMessage": "SendMessage (agent queue)"}


def render(title: str, expect: str, result: ReplayResult, config: Path, faults: list[str] | None = None) -> str:
    records, pages = result.records, result.pages
    rows = [("time", "node/job", "fault", "action", "outcome", "paged", "reason")]
    for record in records:
        rows.append((str(record.get("timestamp", ""))[11:19], str(record.get("node_id") or record.get("job") or "-"),
                     str(record.get("fault")), str(record.get("action")), str(record.get("outcome")),
                     "yes" if record.get("paged") else "no", _truncate(str(record.get("reason", "")), 70)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = [f"== {title} ==", f"   config: {config.name}" + (f" · expected: {expect}" if expect else "")]
    for spec in faults or []:
        key = spec.split("=", 1)[0]
        lines.append(f"   fault: {spec} ({result.injected.get(key, 0)} injected of {result.attempts.get(key, 0)} "
                     "attempts)")
    for index, row in enumerate(rows):
        lines.append("   " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
                     + "  " + row[-1])
        if index == 0:
            lines.append("   " + "  ".join("-" * width for width in widths) + "  " + "-" * 6)
    outcomes = Counter(record.get("outcome") for record in records)
    action_calls = {label: result.calls[key] for key, label in ACTION_CALLS.items() if result.calls.get(key)}
    summary = ", ".join(f"{outcome} {count}" for outcome, count in outcomes.most_common()) or "no records"
    calls = ", ".join(f"{name} {count}" for name, count in action_calls.items()) or "none"
    lines.append(f"   summary: {summary} · pages {len(pages)} · action calls: {calls}")
    if result.schedule_runs:
        runs = ", ".join(f"{_short_id(rule)} {count}×" for rule, count in result.schedule_runs.items())
        lines.append(f"   schedules ran: {runs}")
    if result.put_events:  # what the handlers put (the reconciler's canary), and whether a rule took it anywhere
        put = Counter(event["source"] for event in result.put_events)
        reached = Counter(event["source"] for event in result.put_events if event["functions"])
        lines.append("   events put: " + ", ".join(f"{source} {count}× ({reached[source]} delivered)"
                                                    for source, count in put.items()))
    for change in result.alarms:
        notified = f" -> page via {', '.join(t.rsplit(':', 1)[-1] for t in change['notified'])}" \
            if change["notified"] else ""
        lines.append(f"   alarm: {change['timestamp'][11:19]} {change['alarm']} {change['from']} -> {change['to']}"
                     f"{notified}")
    for point in _probe_lines(result.published):
        lines.append(f"   probe: {point}")
    for dropped in result.dropped:
        what = dropped.get("detail-type") or f"{dropped.get('records')} stream record(s)"
        lines.append(f"   dropped (DLQ): {what} to {dropped['function']}, after its retries")
    page_failures = result.metrics.get("PageFailures")
    if page_failures:
        lines.append(f"   metric: PageFailures {page_failures:g} (pages that could not be published)")
    for job in result.training_jobs:
        lines.append(f"   job started: {job.get('name')} from checkpoint {job.get('checkpoint') or '(none)'}")
    for run in result.slurm_commands:
        said = f": {run['output']}" if run.get("output") else ""
        command = " ".join(run["argv"])
        lines.append(f"   slurm on {run['cluster']}: {command} -> exit {run['exit']}{_truncate(said, 80)}")
    lines.extend(f"   kubernetes on {line}" for line in _kubernetes_lines(result.kubernetes_calls))
    for page in pages:
        lines.append(f"   page: {_truncate(str(page.get('subject')), 100)}")
    for incident in result.incidents:
        lines.append(f"   timeline: {timeline_text(incident)}")
    return "\n".join(lines) + "\n"


def _kubernetes_lines(calls: list[dict]) -> list[str]:
    """The EKS agents' calls that read or change jobs and pods, one line each; the leader checks (Lease) and node
    listings each agent makes every cycle are counted on one line per cluster."""
    lines, routine = [], {}
    for call in calls:
        if "/leases/" in call["path"] or call["path"].endswith("/leases") or call["path"] == "/api/v1/nodes":
            routine[call["cluster"]] = routine.get(call["cluster"], 0) + 1
            continue
        lines.append(f"{call['cluster']}: {call['verb']} {call['path']} -> {call['status']}")
    lines.extend(f"{cluster}: {count} leader checks and node listings" for cluster, count in sorted(routine.items()))
    return lines


def timeline_text(incident: dict) -> str:
    """One incident line in words: fault → detect → act → repair → resume → resolved (seconds from the fault), and
    the work lost; a moment that never came is a dash."""
    def after(key: str) -> str:
        seconds = incident.get(key)
        return "-" if seconds is None else f"+{seconds:.0f}s"

    fault_at = str(incident.get("fault_at") or "")[11:19] or "?"
    what = incident.get("job") or incident.get("node_id") or "-"  # a node_repair line: the job the repair hit
    lost = incident.get("lost_steps")
    work = "lost work unknown" if lost is None else (
        f"lost {lost:.0f} steps" + (f" ({incident['lost_minutes']:g} min)" if incident.get("lost_minutes") else ""))
    return (f"{incident.get('incident_kind')} {what} {incident.get('fault')} at {fault_at}: detect "
            f"{after('time_to_detect_s')} -> act {after('time_to_act_s')} -> repair {after('time_to_repair_s')} -> "
            f"resume {after('time_to_resume_s')} -> resolved {after('total_s')}; {work}")


def _short_id(logical_id: str) -> str:
    """A template logical id without CDK's hash suffix: ``AlarmResponseRecoverySchedule2F5C5063`` → ``...Schedule``."""
    if len(logical_id) > 8 and all(c in "0123456789ABCDEF" for c in logical_id[-8:]):
        return logical_id[:-8]
    return logical_id


def _probe_lines(published: list[dict]) -> list[str]:
    """What the training job reported (its job-level probe metrics), one line per publish."""
    shown = ("Heartbeat", "Step", "NonFiniteLoss", "LastCheckpointStep", "Completed")
    rows: dict[tuple[Any, str], dict[str, float]] = {}
    for point in published:
        dimensions = {d["Name"]: d["Value"] for d in point.get("Dimensions", [])}
        if set(dimensions) != {"Job"} or point.get("MetricName") not in shown:
            continue
        value = point.get("Value", point.get("StatisticValues", {}).get("Maximum"))
        rows.setdefault((point.get("Timestamp"), dimensions["Job"]), {})[point["MetricName"]] = value
    lines = []
    for (stamp, job), values in rows.items():
        when = stamp.strftime("%H:%M:%S") if hasattr(stamp, "strftime") else str(stamp)
        lines.append(f"{when} {job}: " + ", ".join(f"{name} {values[name]:g}" for name in shown if name in values))
    return lines


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
