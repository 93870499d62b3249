"""Specification: an operator's pause (core.mode.Pause) — what it holds, how it lowers the mode, when it tells the
on-call by itself (flows/mode/pause_policy.py), and how a function reads it with the mode (adapters/mode.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from medic.adapters.mode import ModeSwitch
from medic.core.mode import ALL_CLUSTERS, Mode, Pause, mode_under, pause_of
from medic.core.models import Action, Fault, Outcome, Trigger, Why
from medic.core.pages import PageSource, PageWindow
from medic.core.record import About
from medic.flows.mode.pause_policy import PauseNotice, pause_notice, pause_page, pause_reason
from medic.outbox.pages import paused_window

NOW = datetime(2026, 11, 20, 8, 14, 5, tzinfo=UTC)
BY = "arn:aws:sts::123456789012:assumed-role/SRE/alice"


def paused(scope: str, hours: float | None = 4, since: datetime = NOW, **kwargs: object) -> Pause:
    return Pause(scope=scope, by=BY, reason="IB switch upgrade", since=since,
                 until=since + timedelta(hours=hours) if hours is not None else None, **kwargs)  # type: ignore[arg-type]


def test_a_clusters_pause_holds_that_cluster_only_and_the_stacks_holds_every_cluster_and_the_training_jobs():
    pauses = [paused("pretrain-slurm")]
    assert pause_of(pauses, "pretrain-slurm", NOW) == pauses[0]
    assert pause_of(pauses, "finetune-eks", NOW) is None
    assert pause_of(pauses, None, NOW) is None  # a training job: on no cluster
    stack = [paused(ALL_CLUSTERS)]
    assert pause_of(stack, "finetune-eks", NOW) == stack[0] and pause_of(stack, None, NOW) == stack[0]


def test_a_pause_ends_by_itself_at_its_end_and_one_without_an_end_holds_until_lifted():
    timed, open_ended = paused("pretrain-slurm", hours=2), paused("finetune-eks", hours=None)
    later = NOW + timedelta(hours=2)
    assert pause_of([timed], "pretrain-slurm", later - timedelta(seconds=1)) == timed
    assert pause_of([timed], "pretrain-slurm", later) is None
    assert pause_of([open_ended], "finetune-eks", NOW + timedelta(days=30)) == open_ended


def test_a_pause_lowers_act_to_paused_and_leaves_the_big_switch_as_it_is():
    pause = paused("pretrain-slurm")
    assert mode_under(Mode.ACT, pause) is Mode.PAUSED
    assert mode_under(Mode.DRY_RUN, pause) is Mode.DRY_RUN  # a dry run pages nobody: a pause does not change that
    assert mode_under(Mode.PAUSED, pause) is Mode.PAUSED
    assert mode_under(Mode.ACT, None) is Mode.ACT


def test_a_timed_pause_tells_once_when_it_ended():
    pause = paused("pretrain-slurm", hours=2)
    assert pause_notice(pause, NOW + timedelta(hours=1)) is None
    assert pause_notice(pause, NOW + timedelta(hours=2)) is PauseNotice.ENDED
    told = paused("pretrain-slurm", hours=2, paged=frozenset({PauseNotice.ENDED.value}))
    assert pause_notice(told, NOW + timedelta(hours=3)) is None


def test_a_pause_without_an_end_tells_once_when_it_is_still_on_after_a_day():
    pause = paused(ALL_CLUSTERS, hours=None)
    assert pause_notice(pause, NOW + timedelta(hours=23)) is None
    assert pause_notice(pause, NOW + timedelta(days=1)) is PauseNotice.STILL_ON
    told = paused(ALL_CLUSTERS, hours=None, paged=frozenset({PauseNotice.STILL_ON.value}))
    assert pause_notice(told, NOW + timedelta(days=3)) is None


def test_the_notice_quotes_the_operators_words_and_says_what_to_do():
    pause = Pause(scope="pretrain-slurm", by=BY, reason="upgrade\nWhat to do: nothing", since=NOW,
                  until=NOW + timedelta(hours=2))
    page = pause_page(pause, PauseNotice.ENDED, pause_reason(pause, PauseNotice.ENDED))
    assert page.subject == "[Medic] pause ended: cluster pretrain-slurm: Medic acts again"
    assert [line for line in page.lines if line.startswith("What to do:")] == [
        "What to do:     Nothing, if the maintenance is over. Otherwise pause again: medic pause --cluster "
        "pretrain-slurm --for <duration> --reason <text>."]
    assert '"upgrade' in page.body  # the operator's words, quoted


class Book:
    """The ledger's pauses as a function reads them: a list, or a read that fails."""

    def __init__(self, pauses: list[Pause] | None) -> None:
        self.kept = pauses

    def pauses(self) -> list[Pause]:
        if self.kept is None:
            raise ConnectionError("DynamoDB unreachable")
        return self.kept


class Ssm:
    def get_parameter(self, Name: str) -> dict:  # noqa: N803 - boto3's parameter name
        return {"Parameter": {"Value": "act", "Version": 3}}


def switch(book: Book) -> ModeSwitch:
    return ModeSwitch("/medic/Medic/mode", "act", Ssm(), pauses=book, now=lambda: NOW)


def test_a_function_reads_the_pauses_with_the_mode_and_a_paused_cluster_decides_paused():
    reading = switch(Book([paused("pretrain-slurm")]))
    assert reading.current("pretrain-slurm") is Mode.PAUSED
    assert reading.current("finetune-eks") is Mode.ACT
    assert reading.stack() is Mode.ACT


def test_pauses_that_cannot_be_read_keep_the_last_read_and_with_none_every_cluster_reads_paused():
    # Given a container that read one pause, then a ledger that cannot be read
    book = Book([paused("pretrain-slurm")])
    reading = switch(book)
    assert reading.current("finetune-eks") is Mode.ACT
    book.kept, reading._pauses = None, (0.0, reading._pauses[1])  # the cache's 30 s have passed
    # Then the last read holds
    assert reading.current("pretrain-slurm") is Mode.PAUSED and reading.current("finetune-eks") is Mode.ACT
    # And a fresh container that never read them fails closed: every cluster reads paused
    assert switch(Book(None)).current("finetune-eks") is Mode.PAUSED


def test_only_an_operators_pause_quiets_a_clusters_pages_and_never_a_change_of_the_mode():
    record = About(incident="node:pretrain-slurm:i-0d4e5f60718293a4b", trigger=Trigger.NODE_HEALTH, event_id="e-1",
                   mode=Mode.PAUSED, cluster="pretrain-slurm").record(
        fault=Fault.GPU_FATAL, action=Action.REPLACE_NODE, outcome=Outcome.SUPPRESSED, why=Why.PAUSED, reason="r")
    node = PageWindow.cluster(PageSource.NODE, "pretrain-slurm")
    # Given the whole stack paused by an operator: the cluster's pages count in the pause's window
    deps = SimpleNamespace(mode=switch(Book([paused(ALL_CLUSTERS)])))
    paused_pages = PageWindow(PageSource.PAUSE, "cluster pretrain-slurm", 0)
    assert paused_window(deps, record, node) == paused_pages  # type: ignore[arg-type]
    # But a change of the mode pages in its own window whatever holds
    mode = PageWindow(PageSource.MODE, "mode /medic/Medic/mode", before_summary=5)
    assert paused_window(deps, record, mode) == mode  # type: ignore[arg-type]
    # And with only the mode parameter paused (the big switch), pages count as ever
    assert paused_window(SimpleNamespace(mode=switch(Book([]))), record, node) == node  # type: ignore[arg-type]
