"""Quarantined nodes (issue 32, `quarantine_repeat_offenders`): what `medic status` lists, and `medic release`.

A release is an operator request, as a requeue is: the CLI checks the ledger (`quarantine#<cluster>`: an unknown node
or one not quarantined is a clear error here, before anything is sent), then puts one "Medic Release Node" event
(source medic.operator) on the account's default bus, naming the caller (STS GetCallerIdentity) as `requested_by`.
The requeue function's rule takes it: it releases the position in the ledger (once: a second request is recorded
`duplicate`), records who asked, and sends the agent `release_node`. The CLI never writes to an agent queue: each
queue refuses every sender but Medic's functions (docs/security.md).
"""

from __future__ import annotations

import json
from datetime import datetime

from medic.config import MedicConfig
from medic.core.text import quoted
from medic.ledger.quarantine import Quarantine, QuarantineStore
from medic_cli.context import CliError, Context

SOURCE = "medic.operator"
DETAIL_TYPE = "Medic Release Node"  # infra/components/agent_channel.py RELEASE_DETAIL_TYPE


def read(ctx: Context, config: MedicConfig | None) -> list[Quarantine]:
    """The positions held out of service, per configured cluster (one Query each)."""
    if config is None:
        return []
    store = QuarantineStore(ctx.ledger())
    return [one for cluster in config.clusters for one in store.held(cluster.name)]


def lines(held: list[Quarantine], config: MedicConfig | None) -> list[str]:
    out = ["", "Quarantined nodes (a repair loop, quarantine_repeat_offenders; `medic release NODE --cluster C` "
               "returns one):"]
    if config is None:
        return [*out, "  no config: pass --config medic.yaml to list each cluster's quarantined nodes"]
    if not held:
        return [*out, "  none"]
    return [*out, *[f"  {one.cluster}  {one.node_name}  (position {one.position}, instance {one.node_id}) since "
                    f"{one.since:%Y-%m-%d %H:%M} UTC: {one.why}" for one in held]]


def as_json(one: Quarantine) -> dict:
    return {"cluster": one.cluster, "node": one.node_name, "position": one.position, "instance": one.node_id,
            "since": one.since.isoformat(), "why": one.why}


def release(ctx: Context, node: str, cluster: str, reason: str | None, now: datetime) -> str:
    """Ask Medic to return a quarantined node to service; what to tell the operator. CliError when there is nothing
    to release (an unknown cluster or node, a node Medic did not quarantine); a node released already is said so,
    and nothing is sent."""
    config = ctx.config
    if config is not None and config.cluster(cluster) is None:
        names = ", ".join(one.name for one in config.clusters) or "none"
        raise CliError(f"unknown cluster {cluster!r} (the config's clusters: {names}); nothing was sent")
    store = QuarantineStore(ctx.ledger())
    found = store.find(cluster, node)
    if found is None:
        held = ", ".join(f"{one.node_name} ({one.position})" for one in store.held(cluster)) or "none"
        raise CliError(f"unknown node {node!r}: Medic has not quarantined it on {cluster} (quarantined there: "
                       f"{held}); nothing was sent")
    if not found.held:
        return (f"{found.node_name} ({found.position}) on {cluster} is not quarantined: released "
                f"{found.released_at:%Y-%m-%d %H:%M} UTC by {quoted(found.released_by or 'unknown', 130)}; nothing "
                "was sent.")
    detail = {"cluster": cluster, "node": found.node_name, "requested_by": ctx.caller_arn()}
    if reason:
        detail["reason"] = reason
    response = ctx.client("events").put_events(Entries=[{
        "Source": SOURCE, "DetailType": DETAIL_TYPE, "Detail": json.dumps(detail), "EventBusName": "default"}])
    entry = (response.get("Entries") or [{}])[0]
    if response.get("FailedEntryCount") or "EventId" not in entry:
        raise CliError(f"EventBridge did not take the release ({entry.get('ErrorCode')}: {entry.get('ErrorMessage')}); "
                       "nothing was released")
    return (f"Release of {found.node_name} ({found.position}) on {cluster}, quarantined since "
            f"{found.since:%Y-%m-%d %H:%M} UTC, sent (event {entry['EventId']}). Medic releases it once and its agent "
            "returns the node to service; `medic history` shows the release_node records (who asked, when).")
