"""``medic validate CONFIG [--live]``: the checks synth makes (infra/config.py: the same functions, no synth), and
with ``--live`` what only the account can tell: that the names in the config are the account's.

Live checks, per cluster: DescribeCluster finds the name (``clusters[].name`` must be the HyperPod cluster's exact
name), its ``ClusterArn`` ends in the configured id and its orchestrator is the configured one; each group
``protected_groups`` names is one of its instance groups; on a Slurm cluster, the stack's agent policy (output
``...AgentPolicyArn``) is attached to the controller group's role (the ExecutionRole of the group whose
``SlurmConfig.NodeType`` is Controller, or named as AWS names controller groups) and to no other group's role
(ListAttachedRolePolicies on each group's role: HyperPod roles are per instance group, and AWS's samples share one
across groups, which would hand every worker the agent's rights). Per training-job entry: each role exists
(iam GetRole), each checkpoint bucket exists (s3 HeadBucket). A role of another account than the caller's is a
warning (the same sentence synth prints)."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from medic.config import KNOWN_CONTROLLER_GROUPS, ConfigError, MedicConfig
from medic_cli.context import Context
from medic_cli.shared import ensure_infra

OK, WARN, FAIL = "OK", "WARN", "FAIL"


@dataclass(frozen=True)
class Finding:
    state: str  # OK | WARN | FAIL
    subject: str
    detail: str

    def line(self) -> str:
        return f"  {self.state:<5}{self.subject}: {self.detail}"


def command(args: argparse.Namespace, ctx: Context, out: TextIO, err: TextIO) -> int:
    ensure_infra()
    from infra.config import config_warnings, load_config

    path = Path(args.file)
    try:
        config = load_config(path)
    except ConfigError as error:
        print(f"medic validate: {path}: refused, as synth would refuse it:\n{error}", file=out)
        return 1
    account = args.account
    findings: list[Finding] = []
    if args.live:
        try:
            account = account or ctx.client("sts").get_caller_identity()["Account"]
        except (ClientError, BotoCoreError) as error:
            findings.append(Finding(FAIL, "account", f"cannot tell which account these credentials are in: "
                                                     f"{_message(error)}"))
    findings += [Finding(WARN, "config", warning) for warning in config_warnings(config, account)]
    if args.live:
        findings += live_findings(ctx, config)
    print(f"medic validate: {path}: {len(config.clusters)} cluster(s), {len(config.jobs)} watched job(s), "
          f"{len(config.training_jobs)} training-job prefix(es); synth accepts it"
          + (f"; checked against account {account} ({ctx.region or 'default region'})" if args.live else ""),
          file=out)
    for finding in findings:
        print(finding.line(), file=out)
    failed = [finding for finding in findings if finding.state == FAIL]
    warned = [finding for finding in findings if finding.state == WARN]
    print(f"{len(failed)} failed, {len(warned)} warning(s)" + ("" if args.live else
          " (names not checked against the account: --live)"), file=out)
    return 1 if failed else 0


def live_findings(ctx: Context, config: MedicConfig) -> list[Finding]:
    findings: list[Finding] = []
    for cluster in config.clusters:
        subject = f"cluster {cluster.name}"
        try:
            described = ctx.client("sagemaker").describe_cluster(ClusterName=cluster.name)
        except (ClientError, BotoCoreError) as error:
            findings.append(Finding(FAIL, subject, f"DescribeCluster does not find it ({_message(error)}): "
                                                   "clusters[].name must be the HyperPod cluster's exact name"))
            continue
        arn_id = str(described.get("ClusterArn", "")).rsplit("/", 1)[-1]
        if arn_id != cluster.id:
            findings.append(Finding(FAIL, subject, f"id {cluster.id} in the config, but its ClusterArn "
                                                   f"{described.get('ClusterArn')} ends in {arn_id}: set id: {arn_id}"))
        else:
            findings.append(Finding(OK, subject, f"DescribeCluster finds it, id {cluster.id}"))
        orchestrator = "eks" if (described.get("Orchestrator") or {}).get("Eks") else "slurm"
        if orchestrator != cluster.orchestrator:
            findings.append(Finding(FAIL, subject, f"orchestrator {cluster.orchestrator} in the config, but the "
                                                   f"cluster is orchestrated by {orchestrator}"))
        groups = {group.get("InstanceGroupName"): group for group in described.get("InstanceGroups", [])}
        findings += _protected_groups(cluster, subject, groups)
        if cluster.orchestrator == "slurm":
            findings += _agent_policy(ctx, cluster.name, subject, groups)
    for index, spec in enumerate(config.training_jobs):
        for arn in spec.role_arns:
            findings.append(_role(ctx, f"training_jobs.{index}.role_arns", arn))
        for bucket in spec.checkpoint_buckets:
            findings.append(_bucket(ctx, f"training_jobs.{index}.checkpoint_buckets", bucket))
    return findings


def _protected_groups(cluster: Any, subject: str, groups: dict[str, dict]) -> list[Finding]:
    if "protected_groups" in cluster.model_fields_set:
        missing = [group for group in cluster.protected_groups if group not in groups]
        if missing:
            return [Finding(FAIL, subject, f"protected_groups {missing} are not instance groups of the cluster "
                                           f"({', '.join(sorted(groups)) or 'none'}): the nodes meant to be protected "
                                           "are not")]
        return [Finding(OK, subject, f"protected_groups {cluster.protected_groups} are instance groups of it")]
    protected = [group for group in cluster.protected_groups if group in groups]
    if cluster.orchestrator == "slurm" and not protected:
        return [Finding(WARN, subject, f"none of its instance groups ({', '.join(sorted(groups)) or 'none'}) is "
                                       "protected by the default protected_groups: name its controller and login "
                                       "groups in protected_groups")]
    return []


def _agent_policy(ctx: Context, name: str, subject: str, groups: dict[str, dict]) -> list[Finding]:
    """The agent policy on the controller group's role, and on no other group's role."""
    prefix = "SlurmJobRequeueAgent" + re.sub(r"[^A-Za-z0-9]", "", name) + "AgentPolicyArn"
    policy = next((value for key, value in ctx.outputs.items()
                   if key.startswith(prefix) and len(key) == len(prefix) + 8), None)
    if policy is None:
        problem = ctx.stack_problem or f"stack {ctx.stack!r} has no {prefix}... output"
        return [Finding(WARN, subject, f"agent policy not checked: {problem} (deploy first, or --stack)")]
    controllers = {group for group, spec in groups.items()
                   if (spec.get("SlurmConfig") or {}).get("NodeType") == "Controller"
                   or group in KNOWN_CONTROLLER_GROUPS}
    roles: dict[str, set[str]] = {}
    for group, spec in groups.items():
        if spec.get("ExecutionRole"):
            roles.setdefault(spec["ExecutionRole"], set()).add(group)
    findings, attached_to = [], set()
    for role, on_groups in sorted(roles.items()):
        role_name = role.rsplit("/", 1)[-1]
        try:
            attached = [p["PolicyArn"] for page in ctx.client("iam").get_paginator("list_attached_role_policies")
                        .paginate(RoleName=role_name) for p in page["AttachedPolicies"]]
        except (ClientError, BotoCoreError) as error:
            findings.append(Finding(WARN, subject, f"cannot list the policies of role {role_name} "
                                                   f"({_message(error)})"))
            continue
        if policy in attached:
            attached_to |= on_groups
    if not controllers:
        return [*findings, Finding(WARN, subject, "no controller group found (no SlurmConfig.NodeType Controller, no "
                                                  f"group named {sorted(KNOWN_CONTROLLER_GROUPS)}): agent policy "
                                                  "not checked")]
    others = sorted(attached_to - controllers)
    if others:
        findings.append(Finding(FAIL, subject, f"the agent policy is attached to the role of group(s) {others}, "
                                               "not only the controller's: give the controller group a role of its "
                                               "own and attach the policy to it alone"))
    elif not attached_to & controllers:
        findings.append(Finding(FAIL, subject, f"the agent policy {policy} is not attached to the controller group's "
                                               f"role ({', '.join(sorted(controllers))}): the agent cannot read its "
                                               "queue"))
    else:
        findings.append(Finding(OK, subject, "the agent policy is attached to the controller group's role only"))
    return findings


def _role(ctx: Context, subject: str, arn: str) -> Finding:
    name = arn.rsplit("/", 1)[-1]
    try:
        ctx.client("iam").get_role(RoleName=name)
    except (ClientError, BotoCoreError) as error:
        return Finding(FAIL, subject, f"role {arn}: GetRole does not find it ({_message(error)})")
    return Finding(OK, subject, f"role {name} exists")


def _bucket(ctx: Context, subject: str, bucket: str) -> Finding:
    try:
        ctx.client("s3").head_bucket(Bucket=bucket)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code"))
        if code in ("403", "AccessDenied", "Forbidden"):
            return Finding(WARN, subject, f"bucket {bucket} exists, but these credentials may not read it (403)")
        return Finding(FAIL, subject, f"bucket {bucket}: HeadBucket does not find it ({code})")
    except BotoCoreError as error:
        return Finding(FAIL, subject, f"bucket {bucket}: {error}")
    return Finding(OK, subject, f"bucket {bucket} exists")


def _message(error: Exception) -> str:
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        return f"{details.get('Code', 'error')}: {details.get('Message', error)}"
    return str(error)
