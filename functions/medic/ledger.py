"""The ledger (DynamoDB): what Medic did to each node and cluster, and which pages it sent.

Claims are optimistic: the caller reads the state, decides, and writes the claim back on
condition that nobody changed it in between (a version number per item, both items in one
transaction). A racing invocation loses the transaction, re-reads and sees the winner's claim.

Dry runs keep their own copy of every item (a key prefix), so a dry run never blocks a real
action and a dry run still shows what the budget and cooldown would do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from medic.adapters.aws import client as make_client
from medic.adapters.aws import error_code
from medic.domain.alarms import RecoveryWatch
from medic.domain.models import ClusterAction, ClusterState, NodeState
from medic.domain.reconcile import PendingClaim, RepairWatch

NODE_STATE_DAYS = 7  # long enough for escalation memory and cooldowns; TTL cleans up after
# Longer than a handler's 60 s timeout: an unfinished claim older than this belongs to a dead run.
JOB_CLAIM_STALE = timedelta(seconds=90)
CLUSTER_ACTION_HOURS = 2  # longer than any budget or repair window


@dataclass(frozen=True)
class NodeClaim:
    cluster: str
    node_id: str
    fault: str
    action: str
    outcome: str
    attempt: int
    at: datetime
    logical_id: str | None = None  # the node's NodeLogicalId: a replacement keeps it under a new instance id


@dataclass(frozen=True)
class ConfigMismatch:
    """medic.yaml's node_recovery against the cluster's DescribeCluster NodeRecovery."""

    cluster: str
    configured: str  # automatic | none
    actual: str  # automatic | none


class Ledger:
    def __init__(self, table: str, client: Any = None, namespace: str = "") -> None:
        self.table = table
        self._client = client
        self.namespace = namespace

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("dynamodb")
        return self._client

    def for_mode(self, mode: str) -> Ledger:
        namespace = "dry_run#" if mode == "dry_run" else ""
        if namespace == self.namespace:
            return self
        return Ledger(self.table, self.client, namespace)

    # keys
    def _node_key(self, cluster: str, node_id: str) -> dict:
        return {"pk": {"S": f"{self.namespace}node#{cluster}#{node_id}"}, "sk": {"S": "state"}}

    def _cluster_key(self, cluster: str) -> dict:
        return {"pk": {"S": f"{self.namespace}cluster#{cluster}"}, "sk": {"S": "actions"}}

    def _page_key(self, incident: str) -> dict:
        return {"pk": {"S": f"{self.namespace}incident#{incident}"}, "sk": {"S": "page"}}

    def _storm_key(self, cluster: str) -> dict:
        return {"pk": {"S": f"{self.namespace}cluster#{cluster}"}, "sk": {"S": "storm"}}

    def _healthy_key(self, cluster: str, node_id: str) -> dict:
        return {"pk": {"S": f"{self.namespace}node#{cluster}#{node_id}"}, "sk": {"S": "healthy"}}

    def _logical_key(self, cluster: str, logical_id: str) -> dict:
        return {"pk": {"S": f"{self.namespace}logical#{cluster}#{logical_id}"}, "sk": {"S": "node"}}

    def _node_recovery_key(self, cluster: str) -> dict:
        return {"pk": {"S": f"{self.namespace}cluster#{cluster}"}, "sk": {"S": "node_recovery"}}

    # reads
    def load(self, cluster: str, node_id: str) -> tuple[NodeState | None, ClusterState]:
        """The node's last action and the cluster's recent actions, in one round trip."""
        state, cluster_state, _ = self.load_with_health(cluster, node_id)
        return state, cluster_state

    def load_with_health(self, cluster: str, node_id: str) -> tuple[NodeState | None, ClusterState, datetime | None]:
        """The node's last action, the cluster's recent actions and the node's last healthy report."""
        node_key, cluster_key = self._node_key(cluster, node_id), self._cluster_key(cluster)
        response = self.client.batch_get_item(
            RequestItems={self.table: {"Keys": [node_key, cluster_key, self._healthy_key(cluster, node_id)],
                                       "ConsistentRead": True}}
        )
        items = response.get("Responses", {}).get(self.table, [])
        unprocessed = response.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        for key in unprocessed:  # rare (throttling): fetch the rest one by one
            item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
            if item:
                items.append(item)
        node_item = next((i for i in items if i["sk"]["S"] == "state"), None)
        cluster_item = next((i for i in items if i["sk"]["S"] == "actions"), None)
        healthy_item = next((i for i in items if i["sk"]["S"] == "healthy"), None)
        healthy_at = datetime.fromisoformat(healthy_item["at"]["S"]) if healthy_item else None
        return _node_state(node_item), _cluster_state(cluster_item), healthy_at

    def record_healthy(self, cluster: str, node_id: str, at: datetime) -> None:
        """Remember the node's latest Healthy report (by the event's time): an older event about it is stale."""
        try:
            self.client.put_item(
                TableName=self.table, Item={**self._healthy_key(cluster, node_id), "at": {"S": at.isoformat()},
                                            "expires_at": {"N": str(_epoch(at + timedelta(days=NODE_STATE_DAYS)))}},
                ConditionExpression="attribute_not_exists(pk) OR #at < :at",
                ExpressionAttributeNames={"#at": "at"}, ExpressionAttributeValues={":at": {"S": at.isoformat()}})
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise

    def node_for_logical_id(self, cluster: str, logical_id: str) -> str | None:
        """The instance id Medic last acted on under this NodeLogicalId (a replacement has a new one)."""
        item = self.client.get_item(TableName=self.table, ConsistentRead=True,
                                    Key=self._logical_key(cluster, logical_id)).get("Item")
        return item["instance_id"]["S"] if item else None

    def report_config_mismatch(self, mismatch: ConfigMismatch, now: datetime) -> bool:
        """Store the disagreement for `medic status`; True only the first time this exact one is seen."""
        return self._conditional_put(
            {**self._node_recovery_key(mismatch.cluster), "configured": {"S": mismatch.configured},
             "actual": {"S": mismatch.actual}, "seen_at": {"S": now.isoformat()}},
            "attribute_not_exists(pk) OR configured <> :c OR actual <> :a",
            {":c": {"S": mismatch.configured}, ":a": {"S": mismatch.actual}})

    def clear_config_mismatch(self, cluster: str) -> None:
        """The config and the cluster agree (again): nothing for `medic status` to show."""
        self.client.delete_item(TableName=self.table, Key=self._node_recovery_key(cluster))

    # writes
    def claim(self, claim: NodeClaim, node: NodeState | None, cluster: ClusterState,
              reboot: bool) -> bool:
        """Record the action before it is taken; False when another invocation got there first."""
        last_reboot = claim.at if reboot else (node.last_reboot_at if node else None)
        node_item = {
            **self._node_key(claim.cluster, claim.node_id),
            "fault": {"S": claim.fault},
            "action": {"S": claim.action},
            "outcome": {"S": claim.outcome},
            "acted_at": {"S": claim.at.isoformat()},
            "attempt": {"N": str(claim.attempt)},
            "version": {"N": str((node.version if node else 0) + 1)},
            "expires_at": {"N": str(_epoch(claim.at + timedelta(days=NODE_STATE_DAYS)))},
        }
        if last_reboot is not None:
            node_item["last_reboot_at"] = {"S": last_reboot.isoformat()}
        if claim.logical_id:
            node_item["logical_id"] = {"S": claim.logical_id}
        horizon = claim.at - timedelta(hours=CLUSTER_ACTION_HOURS)
        actions = [a for a in cluster.actions if a.at > horizon]
        actions.append(ClusterAction(claim.node_id, claim.action, claim.at, claim.logical_id))
        cluster_item = {
            **self._cluster_key(claim.cluster),
            "actions": {"L": [{"M": {"node": {"S": a.node_id}, "action": {"S": a.action},
                                     "at": {"S": a.at.isoformat()},
                                     **({"logical": {"S": a.logical_id}} if a.logical_id else {})}}
                              for a in actions]},
            "version": {"N": str(cluster.version + 1)},
            "expires_at": {"N": str(_epoch(claim.at + timedelta(days=NODE_STATE_DAYS)))},
        }
        writes = [
            {"Put": {"TableName": self.table, "Item": node_item, **_unchanged(node.version if node else 0)}},
            {"Put": {"TableName": self.table, "Item": cluster_item, **_unchanged(cluster.version)}},
        ]
        if claim.logical_id:  # the repair is found again from its logical id once the instance id changed
            writes.append({"Put": {"TableName": self.table, "Item": {
                **self._logical_key(claim.cluster, claim.logical_id), "instance_id": {"S": claim.node_id},
                "acted_at": {"S": claim.at.isoformat()},
                "expires_at": {"N": str(_epoch(claim.at + timedelta(days=NODE_STATE_DAYS)))}}}})
        try:
            self.client.transact_write_items(TransactItems=writes)
        except ClientError as error:
            if error_code(error) == "TransactionCanceledException":
                return False
            raise
        return True

    def claim_job_failure(self, job_name: str, now: datetime) -> bool:
        """True for the first delivery of a job's failure: each failed job is handled once.

        A claim whose run died before finishing (no ``done_at``) goes stale after
        JOB_CLAIM_STALE, so Lambda's retry of that event handles it; the restart's name is
        deterministic, so a clone the dead run already started is found, not doubled.
        """
        return self._conditional_put(
            {**self._job_failure_key(job_name), "claimed_at": {"S": now.isoformat()},
             "expires_at": {"N": str(_epoch(now + timedelta(days=NODE_STATE_DAYS)))}},
            "attribute_not_exists(pk) OR (attribute_not_exists(done_at) AND claimed_at < :stale)",
            {":stale": {"S": (now - JOB_CLAIM_STALE).isoformat()}},
        )

    def finish_job_failure(self, job_name: str, now: datetime) -> None:
        self.client.update_item(TableName=self.table, Key=self._job_failure_key(job_name),
                                UpdateExpression="SET done_at = :now",
                                ExpressionAttributeValues={":now": {"S": now.isoformat()}})

    def release_job_failure(self, job_name: str) -> None:
        """The run failed with an error: let the retry of the same event handle it."""
        self.client.delete_item(TableName=self.table, Key=self._job_failure_key(job_name))

    def _job_failure_key(self, job_name: str) -> dict:
        return {"pk": {"S": f"{self.namespace}jobfail#{job_name}"}, "sk": {"S": "claim"}}

    def agent_heartbeat(self, cluster: str) -> datetime | None:
        """When the cluster's Slurm agent last reported in (agents write it; dry runs read the real one)."""
        item = self.client.get_item(TableName=self.table, ConsistentRead=True,
                                    Key={"pk": {"S": f"agent#{cluster}"}, "sk": {"S": "heartbeat"}}).get("Item")
        try:
            at = datetime.fromisoformat(item["at"]["S"]) if item else None
        except (KeyError, TypeError, ValueError):
            return None  # unreadable: as good as no heartbeat
        return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at

    def claim_job_restart(self, lineage: str, max_restarts: int, now: datetime) -> int | None:
        """Count one more restart of a job lineage; None when the budget is spent. Atomic under races."""
        try:
            response = self.client.update_item(
                TableName=self.table,
                Key={"pk": {"S": f"{self.namespace}lineage#{lineage}"}, "sk": {"S": "restarts"}},
                UpdateExpression="ADD restarts :one SET last_restart_at = :now, expires_at = :exp",
                ConditionExpression="attribute_not_exists(restarts) OR restarts < :max",
                ExpressionAttributeValues={":one": {"N": "1"}, ":max": {"N": str(max_restarts)},
                                           ":now": {"S": now.isoformat()},
                                           ":exp": {"N": str(_epoch(now + timedelta(days=NODE_STATE_DAYS)))}},
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return None
            raise
        return int(response["Attributes"]["restarts"]["N"])

    def refund_job_restart(self, lineage: str) -> None:
        """Give back a restart whose command never reached the agent (never below zero)."""
        try:
            self.client.update_item(
                TableName=self.table,
                Key={"pk": {"S": f"{self.namespace}lineage#{lineage}"}, "sk": {"S": "restarts"}},
                UpdateExpression="ADD restarts :minus", ConditionExpression="restarts > :zero",
                ExpressionAttributeValues={":minus": {"N": "-1"}, ":zero": {"N": "0"}})
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise

    def record_command(self, command_id: str, context: dict[str, str], now: datetime) -> None:
        """What a queued agent command is for, so its result can be recorded against the same incident."""
        item = {"pk": {"S": f"command#{command_id}"}, "sk": {"S": "issued"},
                **{key: {"S": value} for key, value in context.items()},
                "issued_at": {"S": now.isoformat()},
                "expires_at": {"N": str(_epoch(now + timedelta(days=NODE_STATE_DAYS)))}}
        self.client.put_item(TableName=self.table, Item=item)

    def command_context(self, command_id: str) -> dict[str, str]:
        """What record_command wrote for the command; empty when Medic has no record of issuing it."""
        item = self.client.get_item(TableName=self.table, ConsistentRead=True,
                                    Key={"pk": {"S": f"command#{command_id}"}, "sk": {"S": "issued"}}).get("Item")
        return {key: value["S"] for key, value in (item or {}).items() if "S" in value and key not in ("pk", "sk")}

    def claim_command_record(self, command_id: str, now: datetime) -> bool:
        """True for the first delivery of a command's result: its final record is written once."""
        return self._conditional_put(
            {"pk": {"S": f"command#{command_id}"}, "sk": {"S": "recorded"}, "recorded_at": {"S": now.isoformat()},
             "expires_at": {"N": str(_epoch(now + timedelta(days=NODE_STATE_DAYS)))}},
            "attribute_not_exists(pk)", {},
        )

    def claim_request(self, trigger: str, event_id: str, now: datetime) -> bool:
        """True for the first delivery of an explicit request (an event id names one request)."""
        return self._conditional_put(
            {"pk": {"S": f"{self.namespace}request#{trigger}#{event_id}"}, "sk": {"S": "claim"},
             "claimed_at": {"S": now.isoformat()},
             "expires_at": {"N": str(_epoch(now + timedelta(days=NODE_STATE_DAYS)))}},
            "attribute_not_exists(pk)", {},
        )

    def release_node_event(self, event_id: str) -> None:
        """The run that claimed a node health event failed with an error: let Lambda's retry of it act.
        (Only node events are released: IAM grants DeleteItem on request#node_health# alone.)"""
        key = {"pk": {"S": f"{self.namespace}request#node_health#{event_id}"}, "sk": {"S": "claim"}}
        self.client.delete_item(TableName=self.table, Key=key)

    def set_outcome(self, cluster: str, node_id: str, outcome: str) -> None:
        self.client.update_item(
            TableName=self.table, Key=self._node_key(cluster, node_id),
            UpdateExpression="SET outcome = :o", ExpressionAttributeValues={":o": {"S": outcome}},
        )

    def claim_page(self, incident: str, now: datetime) -> bool:
        """True for the first page of an incident; the incident's later decisions do not page."""
        return self._conditional_put(
            {**self._page_key(incident), "paged_at": {"S": now.isoformat()},
             "expires_at": {"N": str(_epoch(now + timedelta(days=NODE_STATE_DAYS)))}},
            "attribute_not_exists(pk)", {},
        )

    def release_page(self, incident: str) -> None:
        self.client.delete_item(TableName=self.table, Key=self._page_key(incident))

    def close_incident(self, incident: str) -> None:
        """A healthy node ends its incident: its next failure is a new incident that may page."""
        self.release_page(incident)

    def storm_paged_at(self, cluster: str) -> datetime | None:
        """When the cluster's last guardrail summary page went out (None: never, or expired)."""
        item = self.client.get_item(TableName=self.table, ConsistentRead=True, Key=self._storm_key(cluster)).get("Item")
        return datetime.fromisoformat(item["paged_at"]["S"]) if item and "paged_at" in item else None

    def claim_storm_page(self, cluster: str, now: datetime, window: timedelta) -> bool:
        """True at most once per cluster per guardrail window."""
        return self._conditional_put(
            {**self._storm_key(cluster), "paged_at": {"S": now.isoformat()},
             "expires_at": {"N": str(_epoch(now + window))}},
            "attribute_not_exists(pk) OR paged_at < :cutoff", {":cutoff": {"S": (now - window).isoformat()}},
        )

    def release_storm_page(self, cluster: str) -> None:
        self.client.delete_item(TableName=self.table, Key=self._storm_key(cluster))

    # --- alarms and proof of recovery

    def claim_alarm_transition(self, alarm: str, state: str, state_timestamp: str, now: datetime) -> bool:
        """True for the first delivery of an alarm entering a state (its state timestamp names the transition)."""
        return self._conditional_put(
            {"pk": {"S": f"{self.namespace}alarm#{alarm}"}, "sk": {"S": f"transition#{state}#{state_timestamp}"},
             "claimed_at": {"S": now.isoformat()},
             "expires_at": {"N": str(_epoch(now + timedelta(days=NODE_STATE_DAYS)))}},
            "attribute_not_exists(pk)", {},
        )

    def alarm_incident(self, alarm: str) -> dict[str, str] | None:
        """The open incident of an alarm (from its ALARM until its OK), or None."""
        item = self.client.get_item(TableName=self.table, ConsistentRead=True, Key=self._alarm_key(alarm)).get("Item")
        return {key: value["S"] for key, value in item.items() if "S" in value} if item else None

    def open_alarm_incident(self, alarm: str, incident: str, now: datetime) -> None:
        self.client.update_item(
            TableName=self.table, Key=self._alarm_key(alarm),
            UpdateExpression="SET incident = :i, opened_at = if_not_exists(opened_at, :now), expires_at = :exp",
            ExpressionAttributeValues={":i": {"S": incident}, ":now": {"S": now.isoformat()},
                                       ":exp": {"N": str(_epoch(now + timedelta(days=NODE_STATE_DAYS)))}},
        )

    def close_alarm_incident(self, alarm: str, incident: str) -> None:
        """OK after ALARM: the next ALARM is a new incident that may restart and page again."""
        for key in (self._alarm_key(alarm), self._page_key(incident), self._page_key(f"{incident}:recovery"),
                    self._escalation_key(incident), self._recovery_key(incident)):
            self.client.delete_item(TableName=self.table, Key=key)

    def incident_paged(self, incident: str) -> bool:
        return "Item" in self.client.get_item(TableName=self.table, ConsistentRead=True, Key=self._page_key(incident))

    def escalate(self, incident: str, now: datetime) -> None:
        """A restart did not bring training back: no more automatic restarts until the incident closes."""
        self.client.put_item(TableName=self.table, Item={
            **self._escalation_key(incident), "escalated_at": {"S": now.isoformat()},
            "expires_at": {"N": str(_epoch(now + timedelta(days=NODE_STATE_DAYS)))}})

    def is_escalated(self, incident: str) -> bool:
        return "Item" in self.client.get_item(TableName=self.table, ConsistentRead=True,
                                              Key=self._escalation_key(incident))

    def cluster_actions_since(self, cluster: str, since: datetime) -> int:
        """How many node actions Medic took on the cluster since then (its guardrail history)."""
        item = self.client.get_item(TableName=self.table, ConsistentRead=True,
                                    Key=self._cluster_key(cluster)).get("Item")
        return sum(1 for action in _cluster_state(item).actions if action.at >= since)

    def watch_recovery(self, watch: RecoveryWatch) -> None:
        self.client.put_item(TableName=self.table, Item={
            **self._recovery_key(watch.incident), "job": {"S": watch.job}, "cluster": {"S": watch.cluster},
            "restarted_at": {"S": watch.restarted_at.isoformat()}, "deadline": {"S": watch.deadline.isoformat()},
            "attempt": {"N": str(watch.attempt)},
            "expires_at": {"N": str(_epoch(watch.deadline + timedelta(days=NODE_STATE_DAYS)))}})

    def recoveries(self) -> list[RecoveryWatch]:
        """Every open recovery watch (one partition: a handful of items at most)."""
        watches = []
        paginator = self.client.get_paginator("query")
        for page in paginator.paginate(TableName=self.table, ConsistentRead=True,
                                       KeyConditionExpression="pk = :pk",
                                       ExpressionAttributeValues={":pk": {"S": f"{self.namespace}recovery#watch"}}):
            for item in page.get("Items", []):
                watches.append(RecoveryWatch(
                    incident=item["sk"]["S"], job=item["job"]["S"], cluster=item["cluster"]["S"],
                    restarted_at=datetime.fromisoformat(item["restarted_at"]["S"]),
                    deadline=datetime.fromisoformat(item["deadline"]["S"]), attempt=int(item["attempt"]["N"])))
        return watches

    def end_recovery(self, incident: str) -> None:
        self.client.delete_item(TableName=self.table, Key=self._recovery_key(incident))

    def _alarm_key(self, alarm: str) -> dict:
        return {"pk": {"S": f"{self.namespace}alarm#{alarm}"}, "sk": {"S": "open"}}

    def _escalation_key(self, incident: str) -> dict:
        return {"pk": {"S": f"{self.namespace}incident#{incident}"}, "sk": {"S": "escalated"}}

    def _recovery_key(self, incident: str) -> dict:
        return {"pk": {"S": f"{self.namespace}recovery#watch"}, "sk": {"S": incident}}

    def _conditional_put(self, item: dict, condition: str, values: dict) -> bool:
        try:
            self.client.put_item(TableName=self.table, Item=item, ConditionExpression=condition,
                                 **({"ExpressionAttributeValues": values} if values else {}))
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    # --- the reconciler: unfinished claims, repairs in progress, failed nodes already reported

    def cluster_state(self, cluster: str) -> ClusterState:
        """The cluster's recent node actions (the claims the reconciler re-checks)."""
        item = self.client.get_item(TableName=self.table, ConsistentRead=True,
                                    Key=self._cluster_key(cluster)).get("Item")
        return _cluster_state(item)

    def node_claims(self, cluster: str, node_ids: Iterable[str]) -> dict[str, PendingClaim]:
        """The node states of these nodes (with their retry count), by node id; nodes without one are absent."""
        keys = [self._node_key(cluster, node_id) for node_id in dict.fromkeys(node_ids)]
        claims: dict[str, PendingClaim] = {}
        for start in range(0, len(keys), 100):  # BatchGetItem takes 100 keys at most
            pending = keys[start:start + 100]
            for _ in range(5):  # unprocessed keys (throttling) are asked again, a few times
                response = self.client.batch_get_item(
                    RequestItems={self.table: {"Keys": pending, "ConsistentRead": True}})
                for item in response.get("Responses", {}).get(self.table, []):
                    claim = _pending_claim(item)
                    claims[claim.node_id] = claim
                pending = response.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
                if not pending:
                    break
        return claims

    def retry_claim(self, cluster: str, claim: PendingClaim, now: datetime) -> bool:
        """Claim an unconfirmed action again (one more retry); False when the node state changed meanwhile."""
        values = {":v": {"N": str(claim.version)}, ":next": {"N": str(claim.version + 1)},
                  ":o": {"S": "in_flight"}, ":now": {"S": now.isoformat()}, ":one": {"N": "1"},
                  ":zero": {"N": "0"}}
        update = "SET outcome = :o, acted_at = :now, version = :next, retries = if_not_exists(retries, :zero) + :one"
        if claim.action == "reboot_node":
            update += ", last_reboot_at = :now"
        try:
            self.client.update_item(TableName=self.table, Key=self._node_key(cluster, claim.node_id),
                                    UpdateExpression=update, ConditionExpression="version = :v",
                                    ExpressionAttributeValues=values)
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def settle_claim(self, cluster: str, claim: PendingClaim, outcome: str) -> bool:
        """Write an unfinished claim's final outcome, unless the node state changed since it was read."""
        try:
            self.client.update_item(
                TableName=self.table, Key=self._node_key(cluster, claim.node_id),
                UpdateExpression="SET outcome = :o, version = :next", ConditionExpression="version = :v",
                ExpressionAttributeValues={":o": {"S": outcome}, ":v": {"N": str(claim.version)},
                                           ":next": {"N": str(claim.version + 1)}})
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def repair_watches(self, cluster: str) -> dict[str, RepairWatch]:
        """The cluster's nodes a sweep saw in repair, by node id (one partition per cluster)."""
        watches: dict[str, RepairWatch] = {}
        paginator = self.client.get_paginator("query")
        for page in paginator.paginate(TableName=self.table, ConsistentRead=True,
                                       KeyConditionExpression="pk = :pk",
                                       ExpressionAttributeValues={":pk": {"S": self._repair_pk(cluster)}}):
            for item in page.get("Items", []):
                watches[item["sk"]["S"]] = RepairWatch(
                    node_id=item["sk"]["S"], status=item.get("status", {}).get("S", "Unknown"),
                    since=datetime.fromisoformat(item["since"]["S"]), reported="reported_at" in item,
                    medics=item.get("started_by", {}).get("S") == "medic")
        return watches

    def watch_repair(self, cluster: str, node_id: str, status: str, since: datetime, medics: bool) -> None:
        """Remember that the node is in repair, since when and who started it (the first write wins)."""
        self.client.update_item(
            TableName=self.table, Key={"pk": {"S": self._repair_pk(cluster)}, "sk": {"S": node_id}},
            UpdateExpression=("SET since = if_not_exists(since, :since), started_by = if_not_exists(started_by, :by), "
                              "#status = :status, expires_at = :exp"),
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":since": {"S": since.isoformat()}, ":status": {"S": status},
                                       ":by": {"S": "medic" if medics else "hyperpod"},
                                       ":exp": {"N": str(_epoch(since + timedelta(days=NODE_STATE_DAYS)))}})

    def repair_reported(self, cluster: str, node_id: str, now: datetime) -> None:
        self.client.update_item(
            TableName=self.table, Key={"pk": {"S": self._repair_pk(cluster)}, "sk": {"S": node_id}},
            UpdateExpression="SET reported_at = :now", ExpressionAttributeValues={":now": {"S": now.isoformat()}})

    def end_repair_watch(self, cluster: str, node_id: str) -> None:
        self.client.delete_item(TableName=self.table,
                                Key={"pk": {"S": self._repair_pk(cluster)}, "sk": {"S": node_id}})

    def claim_failure_report(self, cluster: str, node_id: str, now: datetime, window: timedelta) -> bool:
        """True at most once per window for a failed node the reconciler found: it is reported once."""
        return self._conditional_put(
            {"pk": {"S": f"{self.namespace}node#{cluster}#{node_id}"}, "sk": {"S": "reconciled"},
             "reported_at": {"S": now.isoformat()}, "expires_at": {"N": str(_epoch(now + window))}},
            "attribute_not_exists(pk) OR reported_at < :cutoff", {":cutoff": {"S": (now - window).isoformat()}},
        )

    def release_failure_report(self, cluster: str, node_id: str) -> None:
        self.client.delete_item(TableName=self.table, Key={"pk": {"S": f"{self.namespace}node#{cluster}#{node_id}"},
                                                           "sk": {"S": "reconciled"}})

    def _repair_pk(self, cluster: str) -> str:
        return f"{self.namespace}repair#{cluster}"


def _unchanged(version: int) -> dict:
    if version == 0:
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    return {"ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": {"N": str(version)}}}


def _node_state(item: dict | None) -> NodeState | None:
    if not item:
        return None
    reboot = item.get("last_reboot_at", {}).get("S")
    return NodeState(
        fault=item["fault"]["S"], action=item["action"]["S"], outcome=item["outcome"]["S"],
        acted_at=datetime.fromisoformat(item["acted_at"]["S"]), attempt=int(item["attempt"]["N"]),
        last_reboot_at=datetime.fromisoformat(reboot) if reboot else None, version=int(item["version"]["N"]),
        logical_id=item.get("logical_id", {}).get("S"),
    )


def _cluster_state(item: dict | None) -> ClusterState:
    if not item:
        return ClusterState(actions=(), version=0)
    actions = tuple(
        ClusterAction(a["M"]["node"]["S"], a["M"]["action"]["S"], datetime.fromisoformat(a["M"]["at"]["S"]),
                      a["M"].get("logical", {}).get("S"))
        for a in item.get("actions", {}).get("L", [])
    )
    return ClusterState(actions=actions, version=int(item["version"]["N"]))


def _epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def _pending_claim(item: dict) -> PendingClaim:
    node_id = item["pk"]["S"].rsplit("#", 1)[-1]
    return PendingClaim(
        node_id=node_id, fault=item["fault"]["S"], action=item["action"]["S"], outcome=item["outcome"]["S"],
        acted_at=datetime.fromisoformat(item["acted_at"]["S"]), attempt=int(item["attempt"]["N"]),
        version=int(item["version"]["N"]), retries=int(item.get("retries", {}).get("N", "0")),
    )
