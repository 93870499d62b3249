"""The results table, and the README block it lives in (``<!-- bench:start -->`` .. ``<!-- bench:end -->``).

``update_readme`` replaces only what is between the markers; when they are missing it inserts a
``## Benchmarks`` section just before ``## Development`` (or at the end). Nothing else is touched.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

START, END = "<!-- bench:start -->", "<!-- bench:end -->"
HEADING = "## Benchmarks"
ANCHOR = "## Development"

# Where import time goes, by top-level package (python -X importtime), grouped by cause.
CAUSES = (
    ("X-Ray SDK, loaded by Powertools' Tracer at import; its patch_all also imports and patches requests, "
     "httplib, sqlite3, mysql, ...",
     ("aws_xray_sdk", "asyncio", "wrapt", "requests", "charset_normalizer", "idna", "http", "sqlite3", "mysql",
      "certifi", "pkgutil", "aiobotocore", "httpx")),
    ("pydantic itself", ("pydantic", "pydantic_core", "annotated_types", "typing_inspection", "typing_extensions")),
    ("Powertools (Logger, Metrics, and the parser's EventBridgeModel: importing one parser model loads all of them)",
     ("aws_lambda_powertools",)),
    ("Medic's own modules, mostly pydantic model classes built at import (config, events, alarms, Slurm) "
     "whichever handler imports them", ("medic",)),
)


# Calls that could leave a node replacement's hot path, and how.
COULD_GO = {
    "ssm:GetParameter": "the mode read, by keeping the run-time mode in the ledger table so the same `BatchGetItem` "
                        "returns it (the SSM parameter stays the operator's switch; a rule on its change copies it)",
    "sagemaker:DescribeCluster": "the cluster size, by storing it in the cluster's ledger item (the scheduled "
                                 "reconciler refreshes it), read by the same `BatchGetItem`",
    "dynamodb:UpdateItem": "the settle write after an accepted call, by letting the reconciler settle an in-flight "
                           "claim whose node it finds in repair (it reads the node's status anyway), so the hot "
                           "path writes the outcome only when the call failed or its answer was lost",
}


def _ms(value: Any, digits: int = 0) -> str:
    if not isinstance(value, int | float) or value != value:
        return "n/a"
    return f"{value:,.{digits}f} ms"


def _us(ns: Any) -> str:
    return f"{ns / 1000:.2f} µs" if isinstance(ns, int | float) else "n/a"


def _broken(result: dict) -> str | None:
    """A replay that ran but whose handlers raised (or that recorded less than it was fed): not a valid number."""
    errors = result.get("errors") or []
    if errors:
        return f"the replay reported {len(errors)}+ error(s), first: {errors[0]}"
    if "records" in result and "events" in result and result["records"] < result["events"]:
        return f"only {result['records']} records for {result['events']} events"
    return None


def _error(result: dict) -> str | None:
    if not isinstance(result, dict) or not result:
        return "not run"
    return result.get("error")


def machine_line(machine: dict) -> str:
    versions = machine.get("versions", {})
    load = machine.get("load_average")
    return (f"Measured by `make bench` on {machine.get('date')} at commit `{machine.get('commit')}`: "
            f"{machine.get('cpu')}, {machine.get('cores')} cores, {machine.get('memory_gib')} GiB, "
            f"{machine.get('os')}, {machine.get('python')} (Lambda runs 3.13); boto3 {versions.get('boto3')}, "
            f"Powertools {versions.get('aws-lambda-powertools')}, pydantic {versions.get('pydantic')}, "
            f"moto {versions.get('moto')}, aws-cdk-lib {versions.get('aws-cdk-lib')}. "
            f"Load average at the start {load[0] if load else 'n/a'} (the machine is shared: wall times under load "
            "stretch, ratios and CPU times less so). Medians; each benchmark runs in a fresh interpreter.")


def causes(breakdown: dict[str, float]) -> list[tuple[str, float]]:
    """The import time above boto3 grouped by cause, largest first (ms, as -X importtime reports them)."""
    grouped: list[tuple[str, float]] = []
    seen: set[str] = set()
    for label, packages in CAUSES:
        total = sum(ms for name, ms in breakdown.items() if name in packages)
        seen.update(packages)
        if total:
            grouped.append((label, total))
    rest = sum(ms for name, ms in breakdown.items() if name not in seen)
    if rest:
        grouped.append(("other standard library and dependencies", rest))
    return sorted(grouped, key=lambda item: -item[1])


def rows(results: dict) -> list[tuple[str, str, str, str]]:
    out: list[tuple[str, str, str, str]] = []
    cold, warm, storm = results.get("cold_start", {}), results.get("warm", {}), results.get("storm", {})
    probe, synth = results.get("probe", {}), results.get("synth", {})

    if _error(cold):
        out.append(("Cold start", f"error: {_error(cold)}", "≤ 1.3× boto3", "not measured"))
    else:
        out.append(("Cold start: `import boto3` alone (fresh interpreter)",
                    f"{_ms(cold['boto3_ms'])} (CPU {_ms(cold['boto3_cpu_ms'])})", "reference", ""))
        for name, entry in cold["handlers"].items():
            out.append((f"Cold start: `medic.handlers.{name}`",
                        f"{_ms(entry['ms'])} = **{entry['ratio']:.2f}×** boto3 (CPU {entry['cpu_ratio']:.2f}×)",
                        "≤ 1.3×", "met" if entry["within_target"] else "gap"))

    if _error(warm):
        out.append(("Warm decision latency", f"error: {_error(warm)}", "", "not measured"))
    else:
        for key, label in (("node", "Warm, node path: replacement, per event"),
                           ("job", "Warm, job path: restart from checkpoint, per event")):
            entry = warm.get(key, {})
            out.append((f"{label} (handler in-process, emulated AWS)",
                        f"{_ms(entry.get('median_ms'), 1)} (Medic + botocore {_ms(entry.get('own_ms'), 1)}, "
                        f"emulator {_ms(entry.get('emulator_ms'), 1)}; p90 {_ms(entry.get('p90_ms'), 1)}; "
                        f"n={entry.get('n')})", "", ""))
        for key in ("node_cold", "job_cold"):
            entry = warm.get(key, {})
            out.append((f"First event of a container, {key.split('_')[0]} path",
                        f"{_ms(entry.get('median_ms'), 1)} (Medic + botocore {_ms(entry.get('own_ms'), 1)}: "
                        "clients and config built)", "", ""))
        for key in ("decide_node", "decide_job"):
            entry = warm.get("pure", {}).get(key, {})
            out.append((f"Pure policy: `{key}` alone",
                        f"{entry.get('per_call_us')} µs/call = {entry.get('events_per_s', 0):,} events/s", "", ""))
        calls = warm.get("calls", {})
        target = warm.get("call_target", 4)
        for key, label in (("replace_node_warm", "AWS calls: node replacement, warm container"),
                           ("replace_node_cold", "AWS calls: node replacement, first in a container"),
                           ("reboot_node", "AWS calls: node reboot"),
                           ("duplicate", "AWS calls: redelivered event (duplicate)"),
                           ("restart_job", "AWS calls: training job restart")):
            profile = calls.get(key, {})
            if not profile.get("count"):
                continue
            sequences = profile.get("sequences", [])
            common = ", ".join(call.split(":")[1] for call in sequences[0]["calls"]) if sequences else ""
            spread = (f" (range {profile['min']}–{profile['max']} over {profile['count']})"
                      if profile["min"] != profile["max"] else "")
            is_replacement = key.startswith("replace_node")
            out.append((label, f"**{profile['median']}**{spread}: {common}", f"≤ {target}" if is_replacement else "",
                        ("met" if profile["median"] <= target else "gap") if is_replacement else ""))

    if _error(storm):
        out.append(("Storm: 1,000 node failures", f"error: {_error(storm)}", "< 60 s", "not measured"))
    else:
        outcomes = ", ".join(f"{v} {k.split(':')[1]}" for k, v in storm["outcomes"].items())
        out.append((f"Storm: {storm['events']:,} node failures over {storm['clusters']} clusters (`sim replay`)",
                    f"**{storm['wall_s']} s** wall ({storm['cpu_s']} s CPU), {storm['events_per_s']} events/s; "
                    f"peak RSS {storm['peak_rss_mib']} MiB ({storm['rss_before_mib']} MiB before the replay); "
                    f"{storm['actions']} actions, {storm['pages']} pages ({outcomes}); "
                    f"{storm['api_calls']:,} API calls",
                    "< 60 s", "met" if storm["within_target"] and not _broken(storm) else "gap"))

    if _error(probe):
        out.append(("Probe: `probe.step()`", f"error: {_error(probe)}", "< 10 µs", "not measured"))
    else:
        out.append(("Probe: `probe.step()` above an empty loop",
                    f"**{_us(probe['step_ns'])}** (rank ≠ 0: {_us(probe['rank_gated_ns'])}; "
                    f"{probe['calls']:,} calls × {probe['repeats']})", "< 10 µs",
                    "met" if probe["within_target"] else "gap"))

    if _error(synth):
        out.append(("Synth", f"error: {_error(synth)}", "", "not measured"))
    else:
        for size, entry in synth["sizes"].items():
            extra = (f"; +{synth['per_extra_cluster_ms']:.0f} ms per extra cluster"
                     if size != "1" and "per_extra_cluster_ms" in synth else "")
            out.append((f"Synth in-process, no cache: {size} cluster{'s' if size != '1' else ''}",
                        f"{entry['median_s']} s ({entry['resources']} resources){extra}", "", ""))
        out.append(("Synth: loading the CDK and jsii once", f"{synth['load_s']} s", "", ""))
    return out


def table(results: dict) -> str:
    lines = ["| Measure | Result | Target | Status |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows(results)]
    return "\n".join(lines)


def notes(results: dict) -> list[str]:
    """For each target: met, or the gap with its cause and the next step."""
    out: list[str] = []
    cold, warm, storm, probe = (results.get(k, {}) for k in ("cold_start", "warm", "storm", "probe"))

    if not _error(cold):
        handlers = cold["handlers"]
        worst = max(handlers, key=lambda name: handlers[name]["ratio"])
        low, high = min(e["ratio"] for e in handlers.values()), max(e["ratio"] for e in handlers.values())
        if cold["within_target"]:
            out.append(f"**Cold start ≤ 1.3× boto3: met** ({low:.2f}–{high:.2f}×).")
        else:
            grouped = causes(handlers[worst].get("above_boto3", {}))
            breakdown = "; ".join(f"{label}: {ms:.0f} ms" for label, ms in grouped[:5])
            out.append(
                f"**Cold start ≤ 1.3× boto3: gap.** The handlers import in {low:.2f}–{high:.2f}× boto3's time "
                f"(worst `{worst}`). Nothing is built at import (clients, config and tables come from "
                "`dependencies()` on the first call, and importing needs no environment), so the gap is the "
                f"imports themselves. Above boto3, for `{worst}` (`python -X importtime` self time, which "
                f"inflates it): {breakdown}. Next steps, largest first: create the Tracer with "
                "`patch_modules=(\"botocore\",)` (Medic makes no HTTP call outside botocore, so patching requests, "
                "httplib, sqlite3 and mysql buys nothing); take `EventBridgeModel` off Powertools' parser (a "
                "ten-line envelope model of our own; only `agent_results` needs the parser, for its DynamoDB "
                "stream records); split the domain models so each handler imports only its own event models. "
                "Those are worth some tens of ms each; pydantic, Powertools' Logger and the X-Ray SDK core stay, "
                "and they alone are more than 30 % of boto3 here, so 1.3× is out of reach with pydantic models "
                "at the edge. Either the target moves to about 2× or parsing at the edge moves off pydantic.")

    if not _error(warm):
        calls = warm.get("calls", {})
        why = warm.get("why", {})
        hot = calls.get("replace_node_warm", {})
        cold_profile = calls.get("replace_node_cold", {})
        target = warm.get("call_target", 4)
        if hot.get("count"):
            steady = min(hot["sequences"], key=lambda s: (len(s["calls"]), -s["n"]))["calls"]  # caches warm
            listed = "; ".join(f"`{call}` ({why.get(call, '')})" for call in steady)
            seen = dict.fromkeys(c for sequence in cold_profile.get("sequences", []) + hot["sequences"]
                                 for c in sequence["calls"])
            extra = [c for c in seen if c not in steady]
            worst = cold_profile.get("median", len(steady) + len(extra))
            extra_text = "; ".join(f"`{call}` ({why.get(call, '')})" for call in extra)
            status = "met" if len(steady) <= target else "gap"
            could_go = [f"`{c.split(':')[1]}`: {COULD_GO[c]}" for c in [*steady, *extra] if c in COULD_GO]
            needed = [c.split(":")[1] for c in steady if c not in COULD_GO]
            text = (f"**AWS calls ≤ {target} per node replacement: {status} in a warm container** "
                    f"({len(steady)} calls; median {hot['median']} over {hot['count']} replacements): {listed}. "
                    "The remediation record is a log line with an EMF metric on stdout, not an API call.")
            if extra:
                text += (f" The first invocation of a container, and any after the short caches expire, adds "
                         f"{extra_text}: {worst} calls; for sparse faults (minutes to hours apart) that is the usual "
                         "case.")
            if could_go:
                text += f" Which could go: {'; '.join(could_go)}."
            text += f" Needed on every replacement: {', '.join(needed)}."
            out.append(text)
        job = calls.get("restart_job", {})
        if job.get("count"):
            why_job = warm.get("why_job", {})
            sequence = job["sequences"][0]["calls"]
            out.append(f"A training job restart costs {job['median']} calls: "
                       + "; ".join(f"`{c}` ({why_job.get(c, '')})" for c in sequence) + ".")
        duplicate = calls.get("duplicate", {})
        if duplicate.get("count"):
            out.append(f"A redelivered event costs {duplicate['median']} calls and no action "
                       "(node lookup, then the ledger says it was handled).")

    for name, result in (("warm", warm), ("storm", storm)):
        if not _error(result) and _broken(result):
            out.append(f"**{name}: the numbers are not valid**: {_broken(result)}.")

    if not _error(storm) and not _broken(storm):
        share = storm["handler_s"] / storm["wall_s"] if storm["wall_s"] else 0
        budget = (f"{storm['actions']} actions ({storm['actions'] / max(1, storm['clusters']):.0f} per cluster: the "
                  f"hourly budget) and {storm['pages']} pages ({storm['pages'] / max(1, storm['clusters']):.0f} per "
                  f"cluster: the storm summary) for {storm['events']:,} failures.")
        suppressed = storm.get("calls_per_suppressed", {})
        sequence = suppressed["sequences"][0]["calls"] if suppressed.get("count") else []
        calls_note = (f" Each suppressed event still costs {suppressed.get('median')} calls "
                      f"({', '.join(c.split(':')[1] for c in sequence)})" if sequence else "")
        if "dynamodb:PutItem" in sequence:
            calls_note += (": the `PutItem` is the storm-page claim, attempted for every suppressed event; reading "
                           "the storm item in the same `BatchGetItem` would skip it once the page is sent.")
        elif calls_note:
            calls_note += "."
        if storm["within_target"]:
            out.append(f"**Storm < 60 s: met** ({storm['wall_s']} s). {budget}{calls_note}")
        else:
            by_function = ", ".join(f"{name} {seconds} s ({storm.get('invocations', {}).get(name, '?')} calls)"
                                    for name, seconds in storm.get("handler_s_by_function", {}).items())
            load = results.get("machine", {}).get("load_average")
            out.append(
                f"**Storm < 60 s: gap** ({storm['wall_s']} s wall, {storm['cpu_s']} s CPU"
                + (f", load average {load[0]} on {results['machine'].get('cores')} cores at the start" if load else "")
                + f"). The handlers take {storm['handler_s']} s of the wall time ({share:.0%}: {by_function}; "
                f"{storm['handler_emulator_s']} s of it is moto answering their calls); the rest is the harness: "
                "routing each event through moto's EventBridge (`PutEvents`, whose pattern matching re-parses "
                "JSONPath per target) and an SQS probe queue per rule, then polling agents and streams after "
                f"each event. Medic's own code (handlers minus emulated calls) is "
                f"{storm['handler_s'] - storm['handler_emulator_s']:.1f} s of it. Next step (in "
                "sim/): match the rules' patterns in-process (they are plain JSON) and keep moto for the services "
                f"the handlers call. {budget}{calls_note}")

    if not _error(probe):
        out.append(f"**Probe < 10 µs per step: {'met' if probe['within_target'] else 'gap'}** "
                   f"({_us(probe['step_ns'])}).")
    if not _error(warm):
        emulator = warm.get("emulator_ms_per_call", {})
        slow = max(emulator, key=emulator.get) if emulator else None
        if slow and emulator[slow] > 20:
            out.append(f"Emulator note: moto answers `{slow}` in {emulator[slow]:.0f} ms on average (it copies "
                       "the whole table for a transaction), which is most of the node path's emulated time; in "
                       "AWS each call is a network round trip of a few ms, so the call count is what matters.")
    return out


def block(results: dict) -> str:
    parts = [machine_line(results.get("machine", {})), "", table(results), ""]
    parts += [f"- {line}" for line in notes(results)]
    parts += ["", "Reproduce: `make bench` (about 5–10 minutes; `python -m bench.<name>` runs one: `cold_start`, "
              "`warm`, `storm`, `synth`; `python bench/probe_overhead.py`). Raw numbers: `build/bench/results.json`."]
    return "\n".join(parts)


def update_readme(path: Path, content: str) -> bool:
    """Write ``content`` between the markers; True when the file changed."""
    text = path.read_text()
    wrapped = f"{START}\n{content.rstrip()}\n{END}"
    if START in text and END in text:
        pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
        new = pattern.sub(lambda _: wrapped, text, count=1)
    else:
        section = f"{HEADING}\n\n{wrapped}\n\n"
        anchor = re.search(rf"^{re.escape(ANCHOR)}\s*$", text, re.MULTILINE)
        if anchor:
            new = text[:anchor.start()] + section + text[anchor.start():]
        else:
            new = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    if new != text:
        path.write_text(new)
        return True
    return False
