"""A loss or throughput given as a tensor is never read on the training thread: reading a GPU tensor's value
(`item()`, `float()`, `tolist()`, `cpu()`, `numpy()`, a comparison's truth) synchronizes the device every step.
The probe holds it detached and reads it once per flush, in the background thread."""

from __future__ import annotations

import gc
import math
import weakref

import pytest

from tests.probe.conftest import by_metric, dims

JOB = dims(Job="llama3-70b")


class StandInTensor:
    """A 0-d tensor as the probe sees one (duck typing: it has `detach`): every read of its value, and every operation
    that would read it on a real GPU tensor (a conversion, a comparison's truth, printing), is counted."""

    reads: list[str] = []
    detached: list[StandInTensor] = []

    def __init__(self, value: float, graph: object | None = None) -> None:
        self._value = value
        self.graph = graph  # what a real tensor's grad_fn keeps alive
        self.requires_grad = graph is not None

    def detach(self) -> StandInTensor:
        twin = StandInTensor(self._value)  # shares storage, no graph
        StandInTensor.detached.append(twin)
        return twin

    def _read(self, how: str) -> float:
        StandInTensor.reads.append(how)
        return self._value

    def __float__(self) -> float:
        return self._read("__float__")

    def __int__(self) -> int:
        return int(self._read("__int__"))

    def __index__(self) -> int:
        return int(self._read("__index__"))

    def __bool__(self) -> bool:
        return bool(self._read("__bool__"))

    def item(self) -> float:
        return self._read("item")

    def tolist(self) -> float:
        return self._read("tolist")

    def cpu(self) -> StandInTensor:
        self._read("cpu")
        return self

    def numpy(self) -> float:
        return self._read("numpy")

    def __lt__(self, other: object) -> bool:
        return self._read("__lt__") < other

    def __gt__(self, other: object) -> bool:
        return self._read("__gt__") > other

    def __le__(self, other: object) -> bool:
        return self._read("__le__") <= other

    def __ge__(self, other: object) -> bool:
        return self._read("__ge__") >= other

    def __eq__(self, other: object) -> bool:
        return self._read("__eq__") == other

    def __hash__(self) -> int:
        return id(self)

    def __format__(self, spec: str) -> str:
        return format(self._read("__format__"), spec)

    def __repr__(self) -> str:
        return f"tensor({self._read('__repr__')})"


@pytest.fixture(autouse=True)
def fresh_counts():
    StandInTensor.reads = []
    StandInTensor.detached = []


class TestNoReadOnTheTrainingThread:
    def test_given_tensor_loss_and_throughput_when_stepping_then_zero_reads_per_step(self, make_probe, fake):
        probe = make_probe(client=fake)

        for step in range(1, 1001):
            probe.step(step, loss=StandInTensor(2.0 + step / 1000), tokens_per_sec=StandInTensor(40_000.0))

        assert StandInTensor.reads == []
        assert probe.bad_inputs == 0

    def test_given_held_tensors_when_flushed_then_each_is_read_once_there_and_published_as_floats(
            self, make_probe, fake):
        probe = make_probe(client=fake)
        for step in range(1, 101):
            probe.step(step, loss=StandInTensor(float(step)), tokens_per_sec=StandInTensor(10.0 * step))

        probe.flush()

        assert StandInTensor.reads == ["__float__"] * 200  # in flush(): the background thread's, once per value
        metrics = by_metric(fake.calls[0])
        assert metrics[("Loss", JOB)]["StatisticValues"] == {
            "SampleCount": 100.0, "Sum": 5050.0, "Minimum": 1.0, "Maximum": 100.0}
        assert metrics[("TokensPerSecond", JOB)]["StatisticValues"]["Maximum"] == 1000.0
        assert metrics[("Heartbeat", JOB)]["Value"] == 100

    def test_given_a_loss_with_a_graph_when_stepped_then_only_a_detached_copy_is_held(self, make_probe, fake):
        probe = make_probe(client=fake)

        class Graph:
            pass

        graph = Graph()
        alive = weakref.ref(graph)
        loss = StandInTensor(3.0, graph=graph)
        probe.step(1, loss=loss)
        del loss, graph
        gc.collect()

        assert alive() is None  # the probe keeps no reference to the graph
        assert [held.graph for held in StandInTensor.detached] == [None]

    def test_given_non_finite_tensor_losses_when_flushed_then_counted_as_non_finite(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(1, loss=StandInTensor(math.nan))
        probe.step(2, loss=StandInTensor(math.inf))
        probe.step(3, loss=StandInTensor(1.5))

        probe.flush()

        metrics = by_metric(fake.calls[0])
        assert metrics[("NonFiniteLoss", JOB)]["Value"] == 2
        assert metrics[("Loss", JOB)]["StatisticValues"]["SampleCount"] == 1.0

    def test_given_a_tensor_whose_read_fails_when_flushed_then_counted_as_a_bad_input_not_raised(
            self, make_probe, fake):
        class Broken(StandInTensor):
            def detach(self) -> Broken:
                return self

            def __float__(self) -> float:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")

        probe = make_probe(client=fake)
        probe.step(1, loss=Broken(1.0))

        assert probe.flush() is True
        assert probe.bad_inputs == 1

    def test_given_floats_and_tensors_mixed_when_flushed_then_one_statistic_set(self, make_probe, fake):
        probe = make_probe(client=fake)
        probe.step(1, loss=1.0)
        probe.step(2, loss=StandInTensor(3.0))

        probe.flush()

        assert by_metric(fake.calls[0])[("Loss", JOB)]["StatisticValues"] == {
            "SampleCount": 2.0, "Sum": 4.0, "Minimum": 1.0, "Maximum": 3.0}

    def test_given_more_tensors_than_a_period_holds_when_stepping_then_the_steps_count_and_memory_is_bounded(
            self, make_probe, fake):
        from medic_probe.probe import _MAX_HELD

        probe = make_probe(client=fake)
        for step in range(1, _MAX_HELD + 101):
            probe.step(step, loss=StandInTensor(1.0))

        assert len(probe._period.losses) == _MAX_HELD
        probe.flush()
        metrics = by_metric(fake.calls[0])
        assert metrics[("Heartbeat", JOB)]["Value"] == _MAX_HELD + 100
        assert metrics[("Loss", JOB)]["StatisticValues"]["SampleCount"] == float(_MAX_HELD)


def test_the_probe_never_imports_torch():
    import medic_probe.probe as module

    assert "torch" not in module.__dict__
    source = open(module.__file__).read()  # noqa: SIM115 - read once
    assert "import torch" not in source and "sys.modules" not in source
