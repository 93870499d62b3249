"""The results table, and the block of docs/benchmarks.md it lives in (``<!-- bench:start -->`` ..
``<!-- bench:end -->``).

``update_page`` replaces only what is between the markers; when they are missing it appends the section (its
heading and the markers) at the end of the page. Nothing else is touched.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

START, END = "<!-- bench:start -->", "<!-- bench:end -->"
# The page the results live in (the README links it; docs/README.md says who reads it).
PAGE = "docs/benchmarks.md"
HEADING = "## Cold start, AWS calls, the storm, the probe"
# The recovery model (bench/recovery.py) has its own block: its numbers do not depend on the machine.
RECOVERY_START, RECOVERY_END = "<!-- bench:recovery:start -->", "<!-- bench:recovery:end -->"
RECOVERY_HEADING = "## Recovery time per failure class"

# Where import time goes, by top-level package (python -X importtime), grouped by cause.
CAUSES = (
    ("X-Ray SDK (with asyncio and wrapt), loaded by Powertools' Tracer when tracing is on (botocore patched only)",
     ("aws_xray_sdk", "asyncio", "wrapt", "requests", "charset_normalizer", "idna", "http", "sqlite3", "mysql",
      "certifi", "pkgutil", "aiobotocore", "httpx")),
    ("pydantic itself", ("pydantic", "pydantic_core", "annotated_types", "typing_inspection", "typing_extensions")),
    ("Powertools (Logger and Metrics)",
     ("aws_lambda_powertools",)),
    ("Medic's own modules, mostly pydantic model classes built at import (the config's, the handler's events)",
     ("medic",)),
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

    cold_target = cold.get("target_ratio", 2.0) if isinstance(cold, dict) else 2.0
    if "cold_start" not in results:
        pass  # not chosen (python -m bench --only ...)
    elif _error(cold):
        out.append(("Cold start", f"error: {_error(cold)}", f"≤ {cold_target}× boto3", "not measured"))
    else:
        out.append(("Cold start: `import boto3` alone (fresh interpreter)",
                    f"{_ms(cold['boto3_ms'])} (CPU {_ms(cold['boto3_cpu_ms'])})", "reference", ""))
        for name, entry in cold["handlers"].items():
            out.append((f"Cold start: `medic.handlers.{name}`",
                        f"{_ms(entry['ms'])} = **{entry['ratio']:.2f}×** boto3 (CPU {entry['cpu_ratio']:.2f}×)",
                        f"≤ {cold_target}×", "met" if entry["within_target"] else "gap"))

    if "warm" not in results:
        pass
    elif _error(warm):
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
                        "clients and config built; in this process botocore's service models may already be "
                        "loaded by another function's container, e.g. the reconciler's first sweep)", "", ""))
        for key in ("decide_node", "decide_job"):
            entry = warm.get("pure", {}).get(key, {})
            out.append((f"Pure policy: `{key}` alone",
                        f"{entry.get('per_call_us')} µs/call = {entry.get('events_per_s', 0):,} events/s", "", ""))
        out += call_rows(warm)

    if "storm" not in results:
        pass
    elif _error(storm):
        out.append(("Storm: node failures", f"error: {_error(storm)}", "exact; Medic's CPU per event flat",
                    "not measured"))
    else:
        out += storm_rows(storm)

    if "probe" not in results:
        pass
    elif _error(probe):
        out.append(("Probe: `probe.step()`", f"error: {_error(probe)}", "< 10 µs", "not measured"))
    else:
        out.append(("Probe: `probe.step()` above an empty loop",
                    f"**{_us(probe['step_ns'])}** with floats, **{_us(probe['tensor_step_ns'])}** with tensors "
                    f"(stand-ins: {probe['tensor_reads_in_step']} reads of a tensor in `step()`; rank ≠ 0: "
                    f"{_us(probe['rank_gated_ns'])}; {probe['calls']:,} calls × {probe['repeats']})", "< 10 µs",
                    "met" if probe["within_target"] else "gap"))

    if "synth" not in results:
        pass
    elif _error(synth):
        out.append(("Synth", f"error: {_error(synth)}", "", "not measured"))
    else:
        for size, entry in synth["sizes"].items():
            extra = (f"; +{synth['per_extra_cluster_ms']:.0f} ms per extra cluster"
                     if size != "1" and "per_extra_cluster_ms" in synth else "")
            out.append((f"Synth in-process, no cache: {size} cluster{'s' if size != '1' else ''}",
                        f"{entry['median_s']} s ({entry['resources']} resources){extra}", "", ""))
        out.append(("Synth: loading the CDK and jsii once", f"{synth['load_s']} s", "", ""))
    return out


def storm_exact(storm: dict) -> bool:
    return (not storm.get("budget_overruns") and not storm.get("page_overruns") and not _broken(storm)
            and storm.get("events_recorded_once") == storm.get("events") and not storm.get("events_recorded_twice"))


def storm_rows(storm: dict) -> list[tuple[str, str, str, str]]:
    outcomes = ", ".join(f"{v:,} {k.split(':')[1]}" for k, v in storm["outcomes"].items())
    ledger = storm.get("ledger", {})
    ratio = storm.get("flat_ratio")
    flat = ratio is not None and ratio <= storm.get("flat_target", 1.2)
    n = storm.get("compared_events")
    return [
        (f"Storm: {storm['events']:,} node failures over {storm['clusters']} clusters (`sim replay`, "
         f"{storm['replay_hours']} h of events)",
         f"**{'exact' if storm_exact(storm) else 'not exact'}**: {storm['actions']:,} actions (budget "
         f"{storm['budget']} per cluster per rolling hour; over it: {', '.join(storm['budget_overruns']) or 'none'}), "
         f"{storm['storm_pages']} storm summary pages (twice in one window: "
         f"{', '.join(storm['page_overruns']) or 'none'}), {storm['records']:,} records "
         f"({storm['events_recorded_once']:,} events with exactly one); {outcomes}",
         "budget, one page per cluster per window, one record per event", "met" if storm_exact(storm) else "gap"),
        ("Storm: Medic's own CPU per event (node handler minus the emulator's answers)",
         f"**{storm.get('own_cpu_ms_first')} ms** over the first {n:,} events, **{storm.get('own_cpu_ms_last')} ms** "
         f"over the last {n:,} = **{ratio}×**",
         f"≤ {storm.get('flat_target', 1.2)}×", "met" if flat else "gap"),
        ("Storm: wall time, memory, ledger",
         f"{storm['wall_s']} s wall ({storm['cpu_s']} s CPU; {storm['events_per_s']} events/s; Medic's handlers "
         f"{storm['handler_cpu_s']} s CPU of which the emulator's answers {storm['handler_emulator_cpu_s']} s); "
         f"peak RSS {storm['peak_rss_mib']} MiB ({storm['rss_before_mib']} MiB before the replay); ledger "
         f"{ledger.get('items', 'n/a'):,} items, the largest {ledger.get('largest_bytes', 'n/a')} bytes "
         f"(`{ledger.get('largest_key', '')}`); {storm['api_calls']:,} API calls", "stated", ""),
    ]


CALL_ROWS = (  # key in warm["calls"], label, key of its target in warm["call_targets"]
    ("replace_node_warm", "AWS calls: node replacement, warm container", "replace_node_warm"),
    ("replace_node_cold", "AWS calls: node replacement, first in a container or after its 30 s mode cache "
                          "(reconciler's snapshot in the ledger)",
     "replace_node_cold"),
    ("reboot_node", "AWS calls: node reboot", None),
    ("duplicate", "AWS calls: redelivered event (duplicate)", None),
    ("suppressed", "AWS calls: suppressed storm event (summary page already out)", "suppressed"),
    ("suppressed_paging", "AWS calls: the suppressed event that sends the storm summary page", None),
    ("restart_job", "AWS calls: training job restart", None),
)


def call_rows(warm: dict) -> list[tuple[str, str, str, str]]:
    """Calls per decision, from the warm replay: the count, its spread, and the usual sequence."""
    out = []
    calls, targets = warm.get("calls", {}), warm.get("call_targets", {})
    for key, label, target_key in CALL_ROWS:
        profile = calls.get(key, {})
        if not profile.get("count"):
            continue
        sequences = profile.get("sequences", [])
        common = ", ".join(call.split(":")[1] for call in sequences[0]["calls"]) if sequences else ""
        spread = (f" (range {profile['min']}–{profile['max']} over {profile['count']})"
                  if profile["min"] != profile["max"] else f" (all {profile['count']})")
        target = targets.get(target_key) if target_key else None
        out.append((label, f"**{profile['median']}**{spread}: {common}", f"≤ {target}" if target else "",
                    ("met" if profile["median"] <= target else "gap") if target else ""))
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
        target = cold.get("target_ratio", 2.0)
        grouped = causes(handlers[worst].get("above_boto3", {}))
        breakdown = "; ".join(f"{label}: {ms:.0f} ms" for label, ms in grouped[:5])
        done = ("Nothing is built at import (clients, config and tables come from `dependencies()` on the first "
                "call); the Tracer patches botocore only (`patch_modules=(\"botocore\",)`, Powertools' documented "
                "way); the EventBridge envelope and the ledger's stream records are Medic's own models, not "
                "Powertools' parser (whose models package builds every event source's models) nor its batch "
                "utility; the adapters only some handlers use (training jobs, checkpoints, metrics, agent queues, "
                "with the alarm and agent models behind them), and the canary's flow in the node function, are "
                "imported on first use. Since issue 31: a handler validates only the config's core sections "
                "(`config_core.CoreConfig`), the job sections and their models load where a job flow reads them "
                "(`Deps.jobs_config`, the job sections alone; the reconciler's training restart path only for a due "
                "backoff); a handler builds only the event models it parses (the operators' requests, the agent's "
                "results, the node health, mode change, canary and schedule events each live with their one "
                "flow); a pydantic empty default is a value, not `default_factory=list` (pydantic inspects a "
                "builtin factory's signature at class creation, ~1.7 ms at the first); internal "
                "values between layers are NamedTuples (a frozen dataclass costs ~1 ms to build on CPython 3.11); "
                "and each handler imports inside `cold_start()`: no garbage collection while the imports build what "
                "lives as long as the container, frozen after (`gc.freeze`), so no collection walks it again.")
        if cold["within_target"]:
            out.append(f"**Cold start ≤ {target}× boto3: met** ({low:.2f}–{high:.2f}×, worst `{worst}`). {done}")
        else:
            over = [name for name, entry in handlers.items() if not entry["within_target"]]
            out.append(
                f"**Cold start ≤ {target}× boto3: gap** for {', '.join(f'`{n}`' for n in over)} ({low:.2f}–"
                f"{high:.2f}×, worst `{worst}`). {done} Above boto3, for `{worst}` (`python -X importtime` self "
                f"time, which inflates it): {breakdown}. What is left is pydantic itself and the classes built "
                "from it (the config's core models and the handler's event models, which its first call needs anyway), "
                "the X-Ray SDK "
                "that Powertools' Tracer loads when tracing is on, and the handler's own modules. Next steps: "
                "the X-Ray SDK goes only with tracing off (Lambda's active tracing still records "
                "each invocation without it, but not the botocore subsegments); the config models could be built "
                "with `defer_build=True`, which moves their cost to the first call (a Lambda cold start pays "
                "both; see \"Cold start and SnapStart\" below the block).")

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
            out.append(f"A redelivered event costs {duplicate['median']} call{'s' if duplicate['median'] != 1 else ''} "
                       "and no action "
                       "(the ledger read finds this event id's claim).")

    for name, result in (("warm", warm), ("storm", storm)):
        if not _error(result) and _broken(result):
            out.append(f"**{name}: the numbers are not valid**: {_broken(result)}.")

    if not _error(storm) and not _broken(storm):
        out += storm_notes(storm, results.get("machine", {}))

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


def storm_notes(storm: dict, machine: dict) -> list[str]:
    out = []
    events, clusters = storm["events"], storm["clusters"]
    if storm_exact(storm):
        out.append(f"**Storm of {events:,} events over {clusters} clusters: exact.** Every cluster stayed within "
                   f"{storm['budget']} actions in every rolling hour ({storm['actions']:,} actions over "
                   f"{storm['replay_hours']} h of events), got at most one storm summary page per window "
                   f"({storm['storm_pages']} pages), and every event got exactly one record.")
    else:
        out.append(f"**Storm of {events:,} events: not exact**: budget overruns in "
                   f"{storm['budget_overruns'] or 'no cluster'}, second pages inside a window in "
                   f"{storm['page_overruns'] or 'no cluster'}, {storm['events'] - storm['events_recorded_once']} "
                   "events without exactly one record.")
    suppressed = storm.get("calls_per_suppressed", {})
    if suppressed.get("count"):
        sequence = suppressed["sequences"][0]["calls"]
        met = suppressed["median"] <= storm.get("suppressed_call_target", 2)
        out.append(f"**Suppressed storm event ≤ {storm.get('suppressed_call_target', 2)} calls: "
                   f"{'met' if met else 'gap'}** ({suppressed['median']} over {suppressed['count']:,} suppressed "
                   f"events of the storm: {', '.join(c.split(':')[1] for c in sequence)}). `BatchGetItem` reads the "
                   "node's and cluster's ledger items with the cluster's storm-page item, so once the window's "
                   "summary page is out a suppressed event writes nothing; `DescribeClusterNode` is the node's "
                   "instance group and status, which the event does not carry (a protected node pages, whatever "
                   "the budget says).")
    ratio, target = storm.get("flat_ratio"), storm.get("flat_target", 1.2)
    if ratio is not None:
        head = (f"**Medic's CPU per event flat within {target - 1:.0%} from the first to the last "
                f"{storm['compared_events']:,} events: {'met' if ratio <= target else 'gap'}** ({ratio}×: "
                f"{storm['own_cpu_ms_first']} → {storm['own_cpu_ms_last']} ms; warm containers, the emulator's "
                "CPU time answering each call left out).")
        if ratio > target:
            head += (" Per event, Medic reads and writes a constant set of ledger items (the cluster's action "
                     "list holds only the last two hours), so what grows is outside the decision: see "
                     "`python -m bench.storm --events 2000` under cProfile for where.")
        out.append(head)
    ledger = storm.get("ledger", {})
    load = machine.get("load_average")
    out.append(f"Wall time, honestly: {storm['wall_s']} s for {events:,} events ({storm['events_per_s']} events/s"
               + (f", load average {load[0]} on {machine.get('cores')} cores at the start" if load else "")
               + f"). Medic's handlers take {storm['handler_cpu_s']} s of the {storm['cpu_s']} s of CPU, "
               f"{storm['handler_emulator_cpu_s']} s of which is moto answering their calls; the rest is the "
               "harness (routing each event through moto's EventBridge and an SQS routing probe, the "
               "reconciler's and other schedules every few replayed minutes). `python -m bench.storm --events N` "
               "runs another size; the tests run a small one.")
    alive, stream = ledger.get("emulator_stream_records_alive"), ledger.get("emulator_stream_records")
    memory = (f"Peak RSS {storm['peak_rss_mib']:,} MiB for the replay process, {storm['rss_before_mib']} MiB "
              "before it, the emulated account included (a Lambda container of Medic's holds one invocation's "
              "clients and config, and no handler keeps anything per event)")
    if isinstance(alive, int) and isinstance(stream, int) and stream and alive > 2 * stream:
        memory += (f". Most of it is the emulator's: at the end {alive:,} moto stream records were alive for "
                   f"the {stream:,} writes the ledger's DynamoDB stream holds. moto keeps every model instance it "
                   "creates (for MotoServer's dashboard) and its `TransactWriteItems` deep-copies every table it "
                   "writes, stream included, as its rollback copy. `sim replay` drops moto's references and collects "
                   "the copies every 500 lines (`sim.replay._forget_model_instances`); records still alive beyond "
                   "the stream's own mean that did not work here")
    out.append(memory + ".")
    small = isinstance(ledger.get("largest_bytes"), int) and ledger["largest_bytes"] < 4096
    out.append(f"**Ledger items {'do not grow' if small else 'may grow'} with the storm**: "
               f"{ledger.get('items', 'n/a'):,} items at the end, the "
               f"largest {ledger.get('largest_bytes', 'n/a')} bytes (`{ledger.get('largest_key', '')}`) of "
               "DynamoDB's 400 KB: the cluster's action list keeps two hours of actions, which the budget bounds "
               "(4 an hour), and suppressed events write nothing.")
    return out


def block(results: dict) -> str:
    parts = [machine_line(results.get("machine", {})), "", table(results), ""]
    parts += [f"- {line}" for line in notes(results)]
    total = results.get("total_s")
    took = f"this run took {total / 60:.0f} min" if isinstance(total, int | float) else "it takes about 15 minutes"
    parts += ["", f"Reproduce: `make bench` ({took}, most of it the 10,000-event storm; `python -m bench --only warm` "
              "prints the calls per replacement and per suppressed storm event in about a minute; `python -m "
              "bench.<name>` runs one: `cold_start`, `warm`, `storm --events N`, `synth`, `recovery` (the recovery "
              "table below); `python "
              "bench/probe_overhead.py`). Raw numbers: `build/bench/results.json`."]
    return "\n".join(parts)


def update_page(path: Path, content: str, *, start: str = START, end: str = END, heading: str = HEADING) -> bool:
    """Write ``content`` between the markers of the page at ``path``; True when the file changed."""
    text = path.read_text()
    wrapped = f"{start}\n{content.rstrip()}\n{end}"
    if start in text and end in text:
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
        new = pattern.sub(lambda _: wrapped, text, count=1)
    else:
        new = text.rstrip("\n") + f"\n\n{heading}\n\n{wrapped}\n"
    if new != text:
        path.write_text(new)
        return True
    return False
