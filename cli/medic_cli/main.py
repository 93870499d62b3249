"""``medic``: see what Medic did and steer it without a deploy.

  medic status                      mode, open incidents, recent actions, guardrail budgets left, agents, paging
  medic test-page [--note TEXT]     a page marked TEST through the stack's topic; who would receive it
  medic history [filters] [--json]  the remediation records (CloudWatch Logs, or --from-file a sim replay)
  medic report [filters] [--json]   goodput per job and the incidents behind it (same sources)
  medic pause [--cluster C]... [--for 4h] --reason TEXT
                                    pause clusters or the stack: record, act on nothing, page once an hour
  medic resume [--cluster C]...     end those pauses (without --cluster: every pause, and mode act)
  medic mode [act|dry_run|paused]   show the mode and its last changes, or set it
  medic explain EVENT.json          what Medic would decide for this event now, and why; acts on nothing
  medic backtest --config C.yaml    what config C would have decided differently on the events Medic received
  medic stream-failures [--redrive] the agent results' stream batches Lambda gave up on, read back (and recorded)
  medic validate CONFIG [--live]    the checks synth makes, without a synth; --live: the names against the account
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from botocore.exceptions import BotoCoreError, ClientError

from medic_cli.shared import MedicNotFound, ensure_medic

COMMON_DEFAULTS = {"stack": "Medic", "region": None, "profile": None, "config": None, "table": None}


def _common(parser: argparse.ArgumentParser, top: bool) -> None:
    """Options accepted before or after the command (``medic --region X status`` = ``medic status --region X``)."""
    def default(name: str) -> object:
        return COMMON_DEFAULTS[name] if top else argparse.SUPPRESS

    group = parser.add_argument_group("where Medic runs")
    group.add_argument("--stack", default=default("stack"), help="CloudFormation stack name (default: Medic)")
    group.add_argument("--region", default=default("region"), help="AWS region (default: the usual AWS settings)")
    group.add_argument("--profile", default=default("profile"), help="AWS profile (default: the usual AWS settings)")
    group.add_argument("--config", default=default("config"), metavar="PATH",
                       help="Medic config for guardrails and clusters (default: the deployed functions' config, "
                            "else ./medic.yaml)")
    group.add_argument("--table", default=default("table"), metavar="NAME",
                       help="ledger table (default: the stack output LedgerTableName)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medic", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(parser, top=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    status = commands.add_parser("status", help="mode, open incidents, recent actions, guardrail budgets left")
    status.add_argument("--since", default="24h", help="recent actions since (24h, 30m, 7d or an ISO time)")
    status.add_argument("--json", action="store_true", help="one JSON object")
    _common(status, top=False)

    history = commands.add_parser("history", help="the remediation records, oldest first",
                                  description="The remediation records from the stack's log groups "
                                              "(FilterLogEvents), or from a `sim replay` output file.")
    history.add_argument("--cluster", help="only this cluster")
    history.add_argument("--node", help="only this node (instance id); also shows the ledger's state of the node")
    history.add_argument("--job", help="only this job (a lineage root also matches its restarts)")
    history.add_argument("--outcome", action="append", default=[],
                         help="only these outcomes (repeatable or comma-separated: failed,suppressed)")
    history.add_argument("--why", action="append", default=[],
                         help="only these sub-reasons of the outcomes (repeatable or comma-separated: paused,"
                              "rate_limit; docs/remediation-log.md)")
    history.add_argument("--needs-human", action="store_true", help="only the records that say a human must act")
    history.add_argument("--since", help="from (24h, 30m, 7d or an ISO time; default 24h, all with --from-file)")
    history.add_argument("--until", help="until (an ISO time, or a duration before now)")
    history.add_argument("--limit", type=int, default=500, help="at most this many, the newest (default 500; 0: all)")
    history.add_argument("--json", action="store_true", help="JSON Lines, one record per line (readable by "
                                                             "--from-file)")
    history.add_argument("--from-file", metavar="FILE", help="read `python -m sim replay` output (or --json "
                                                             "output) instead of CloudWatch Logs ('-' = stdin)")
    history.add_argument("--log-group", action="append", default=[], metavar="NAME",
                         help="log group to search (repeatable; default: the stack outputs *LogGroup)")
    _common(history, top=False)

    report = commands.add_parser(
        "report", help="goodput per job, time lost per incident kind, the top causes, the incidents",
        description="Per-job goodput (productive time / wall time) and the incidents behind it, from the "
                    "incident lines in the stack's log groups (with the probe's Medic/Training minutes when the "
                    "job has a probe), or from a `sim replay` output file.")
    report.add_argument("--job", help="only this job (a lineage root also matches its restarts)")
    report.add_argument("--cluster", help="only this cluster")
    report.add_argument("--since", help="from (7d, 12h or an ISO time; default 7d, the replay's span with "
                                        "--from-file)")
    report.add_argument("--until", help="until (an ISO time, or a duration before now; default now)")
    report.add_argument("--top", type=int, default=5, help="causes to show (default 5)")
    report.add_argument("--json", action="store_true", help="one JSON object")
    report.add_argument("--from-file", metavar="FILE", help="read `python -m sim replay` output instead of "
                                                            "CloudWatch ('-' = stdin)")
    report.add_argument("--log-group", action="append", default=[], metavar="NAME",
                        help="log group to search (repeatable; default: the stack outputs *LogGroup)")
    _common(report, top=False)

    test_page = commands.add_parser(
        "test-page", help="publish a page marked TEST through the stack's topic; list who would receive it "
                          "(exit 1 when no subscription is confirmed)",
        description="Publishes one page, clearly marked as a test, to the stack's paging topic (stack output "
                    "PagingTopicArn), then lists the topic's subscriptions and which still wait for their "
                    "confirmation (they receive nothing until their owner confirms). Exit status: 0 the page went "
                    "out and at least one subscription is confirmed, 1 otherwise.")
    test_page.add_argument("--note", default="", help="a line added to the test page (e.g. who should see it)")
    test_page.add_argument("--json", action="store_true", help="one JSON object")
    _common(test_page, top=False)

    pause = commands.add_parser(
        "pause", help="pause clusters (or the whole stack): Medic decides and records, acts on nothing, pages once "
                      "per cluster per hour; ends by itself with --for",
        description="Pauses the named clusters (--cluster, repeatable), or the whole stack without one: their "
                    "decisions run as in mode paused (recorded, no action), their pages at most one per cluster per "
                    "hour. With --for it ends by itself (and pages once then); without, it pages once when it is "
                    "still on after a day. The mode parameter (medic mode) stays the big switch.")
    pause.add_argument("--cluster", action="append", default=[], help="only this cluster (repeatable)")
    pause.add_argument("--for", dest="for_", metavar="DURATION", help="end by itself after this long (30m, 4h, 2d)")
    pause.add_argument("--reason", required=True, help="why (recorded with who paused; shown to the on-call)")
    _common(pause, top=False)
    resume = commands.add_parser("resume", help="end the pauses of --cluster; without it, end every pause and set "
                                                "mode act")
    resume.add_argument("--cluster", action="append", default=[], help="only this cluster's pause (repeatable)")
    resume.add_argument("--reason", default="", help="why (recorded with who resumed)")
    _common(resume, top=False)
    release = commands.add_parser(
        "release", help="return a node Medic quarantined (a repair loop) to service",
        description="Asks Medic to release a node it quarantined (quarantine_repeat_offenders: drained in Slurm, "
                    "cordoned on EKS): one \"Medic Release Node\" event (source medic.operator) naming you as "
                    "requested_by; Medic releases it once, records who asked, and its agent returns the node to "
                    "service. NODE: the node's Slurm or Kubernetes name, its instance id or its NodeLogicalId (as "
                    "`medic status` lists it). Exit status 1 for an unknown cluster or a node Medic has not "
                    "quarantined (nothing sent); a node released already is said so, and nothing is sent.")
    release.add_argument("node", help="the quarantined node (as medic status lists it)")
    release.add_argument("--cluster", required=True, help="the cluster it is in")
    release.add_argument("--reason", default=None, help="why (recorded, quoted)")
    _common(release, top=False)
    mode = commands.add_parser("mode", help="show the mode and its last changes, or set it")
    mode.add_argument("mode", nargs="?", choices=("act", "dry_run", "paused"), help="the new mode")
    mode.add_argument("--reason", default="", help="why (recorded with who changed it)")
    mode.add_argument("--last", type=int, default=5, help="changes to show without a new mode (default 5)")
    _common(mode, top=False)

    explain = commands.add_parser("explain", help="what Medic would decide for an event now, and why (acts on "
                                                  "nothing)")
    explain.add_argument("event", help="an EventBridge event as JSON: node health or training job state change "
                                       "('-' = stdin)")
    explain.add_argument("--json", action="store_true", help="one JSON object")
    _common(explain, top=False)

    backtest = commands.add_parser(
        "backtest", help="replay the events Medic received with a candidate --config; show what it decides "
                         "differently (exit 0: nothing, 1: some decisions, 2: error)",
        description="Replays the events Medic received (the stack's event archive, or --events) in time order "
                    "through the replay emulator with the candidate --config, and sets each decision against the "
                    "live one (the stack's log groups, or --against). Exit status: 0 no decision differs, 1 some "
                    "do, 2 the backtest could not run.")
    backtest.add_argument("--since", help="from (7d, 24h or an ISO time; default 7d, all with --events)")
    backtest.add_argument("--until", help="until (an ISO time, or a duration before now; default now)")
    backtest.add_argument("--cluster", help="only this cluster's events and decisions")
    backtest.add_argument("--events", metavar="FILE", help="EventBridge events as JSON Lines instead of the "
                                                           "archive (needs --against)")
    backtest.add_argument("--against", metavar="FILE", help="the live records: `sim replay` output or `medic "
                                                            "history --json` (needs --events)")
    backtest.add_argument("--world", metavar="FILE", help="sim directives that set what the records cannot say "
                                                          "(cluster sizes, node groups and statuses)")
    backtest.add_argument("--json", action="store_true", help="one JSON object")
    _common(backtest, top=False)

    failures = commands.add_parser(
        "stream-failures", help="the agent results' stream batches Lambda gave up on: read back from the stream "
                                "(24 h) or the agents' ledger items, and with --redrive recorded",
        description="Reads the stack's stream failures queue (output AgentResultsStreamFailuresQueueUrl): each message "
                    "says where a batch of the ledger's stream was, not what it held. Reads the batch back from the "
                    "stream (kept 24 hours), or when it is gone from the agents' result items in the ledger, and shows "
                    "each agent result and whether Medic recorded it. Exit status: 0 nothing left unrecorded, 1 some "
                    "results are (or an error).")
    failures.add_argument("--redrive", action="store_true",
                          help="hand each unrecorded result to the results function (stack output "
                               "AgentResultsFunctionName), then delete each message whose batch is done")
    failures.add_argument("--json", action="store_true", help="one JSON object")
    _common(failures, top=False)

    validate = commands.add_parser(
        "validate", help="the checks synth makes on a config, without a synth; --live: its names in the account",
        description="Refusals and warnings exactly as synth makes them (infra/config.py). With --live, against the "
                    "account: each cluster's name and id (DescribeCluster), protected_groups, the agent policy on the "
                    "controller group's role only, the training jobs' roles (GetRole) and buckets (HeadBucket). "
                    "Exit status: 0 nothing failed (warnings allowed), 1 something did.")
    validate.add_argument("file", metavar="CONFIG", help="the medic.yaml to check")
    validate.add_argument("--live", action="store_true", help="also check the names against the account (read-only "
                                                             "calls; the stack's outputs for the agent policy)")
    validate.add_argument("--account", help="the deploying account, for the role_arns warning (default with --live: "
                                            "the credentials' account)")
    _common(validate, top=False)
    return parser


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None,
         context: object = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        ensure_medic()
    except MedicNotFound as error:
        print(f"medic: {error}", file=err)
        return 1
    from medic_cli import commands
    from medic_cli.context import CliError, Context

    ctx = context if isinstance(context, Context) else Context()
    ctx.stack, ctx.region, ctx.profile = args.stack, args.region or ctx.region, args.profile or ctx.profile
    ctx.table_name = args.table or ctx.table_name
    ctx.config_path = args.config or ctx.config_path
    try:
        return commands.run(args, ctx, out, err)
    except CliError as error:
        print(f"medic: {error}", file=err)
        return 1
    except ClientError as error:
        details = error.response.get("Error", {})
        print(f"medic: {error.operation_name} failed: {details.get('Code')}: {details.get('Message')}", file=err)
        return 1
    except BotoCoreError as error:
        print(f"medic: {error} (check AWS credentials and --region/--profile)", file=err)
        return 1



if __name__ == "__main__":
    sys.exit(main())
