"""The probe's own hang verdict (`Stalled`): from the job's step intervals, after a warm-up, not during a marked pause.

Time is a fake clock the test moves; `watch()` is the background thread's check (every 10 s in a real run).
"""

from __future__ import annotations

import pytest

from tests.probe.conftest import by_metric, dims

JOB = dims(Job="llama3-70b")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def stalled_values(fake) -> list[float]:
    """Every `Stalled` datapoint published so far, in order."""
    return [datum["Value"] for call in fake.calls for datum in call["MetricData"] if datum["MetricName"] == "Stalled"]


def step_every(probe, clock: Clock, seconds: float, count: int, first: int = 1) -> int:
    for number in range(first, first + count):
        clock.now += seconds
        probe.step(number, loss=1.0)
    return first + count - 1


def watch_for(probe, clock: Clock, seconds: float, every: float = 10.0) -> list[bool]:
    """The background thread's checks over ``seconds`` of silence: each verdict."""
    verdicts = []
    for _ in range(int(seconds // every)):
        clock.now += every
        verdicts.append(probe.watch())
    return verdicts


@pytest.fixture
def clock() -> Clock:
    return Clock()


class TestStalled:
    def test_given_a_job_stepping_every_second_when_steps_stop_then_stalled_is_published_within_the_floor_and_a_check(
            self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)
        step_every(probe, clock, 1.0, 100)
        probe.flush()

        verdicts = watch_for(probe, clock, 120)

        # the default floor (60 s) dominates 3 x the p99 of 1-second steps: stalled at the first check past 60 s
        assert verdicts[:6] == [False] * 6
        assert verdicts[6:] == [True] * 6
        assert stalled_values(fake) == [0, *[1] * 6]  # the flush's 0, then every check while stalled
        assert probe.stalled is True
        datum = by_metric(fake.calls[-1])[("Stalled", JOB)]
        assert datum["StorageResolution"] == 1 and datum["Value"] == 1

    def test_given_a_stalled_job_when_it_steps_again_then_the_next_check_publishes_zero_once(
            self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)
        last = step_every(probe, clock, 1.0, 50)
        watch_for(probe, clock, 70)
        published = len(stalled_values(fake))

        step_every(probe, clock, 1.0, 1, first=last + 1)
        assert watch_for(probe, clock, 30) == [False, False, False]

        assert stalled_values(fake)[published:] == [0]  # the alarm goes OK; then nothing more until the next flush

    def test_given_a_job_stepping_once_every_5_minutes_when_watched_between_steps_then_never_stalled(
            self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)
        last = step_every(probe, clock, 300.0, 25)

        verdicts = []
        for number in range(last + 1, last + 13):  # an hour more of 5-minute steps, checked every 10 s
            verdicts += watch_for(probe, clock, 290)
            clock.now += 10
            probe.step(number)
        probe.flush()

        assert not any(verdicts)
        assert set(stalled_values(fake)) == {0}

    def test_given_a_job_stepping_every_5_minutes_when_it_stops_then_stalled_after_3_times_its_p99(
            self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)
        step_every(probe, clock, 300.0, 25)

        verdicts = watch_for(probe, clock, 910)

        assert verdicts.index(True) == 90  # past 900 s = 3 x 300 s: the 91st 10-second check

    def test_given_a_custom_floor_and_factor_when_steps_stop_then_they_set_the_bound(self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock, hang_floor_seconds=30, hang_factor=5)
        step_every(probe, clock, 10.0, 30)

        verdicts = watch_for(probe, clock, 60, every=5)

        assert verdicts.index(True) == 10  # past max(30, 5 x 10 s) = 50 s: 55 s

    def test_given_a_rare_slow_step_in_the_distribution_when_a_step_is_that_slow_again_then_no_stall(
            self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock, hang_floor_seconds=20)
        last = 0
        for _ in range(5):  # a 30-second evaluation every 20 steps, unmarked: 5 % of intervals
            last = step_every(probe, clock, 1.0, 19, first=last + 1)
            last = step_every(probe, clock, 30.0, 1, first=last + 1)

        assert not any(watch_for(probe, clock, 80))  # within 3 x the p99 (30 s)
        assert any(watch_for(probe, clock, 20))  # past 90 s


class TestWarmUp:
    def test_given_fewer_steps_than_the_warm_up_when_steps_stop_then_not_judged(self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)
        step_every(probe, clock, 1.0, 20)  # 19 intervals: one short of the default 20

        assert not any(watch_for(probe, clock, 600))
        assert stalled_values(fake) == []

    def test_given_a_restarted_process_when_its_first_steps_come_then_they_are_not_judged_until_the_warm_up(
            self, make_probe, fake, clock):
        old = make_probe(client=fake, clock=clock, hang_warmup_steps=5)
        step_every(old, clock, 1.0, 100)
        old.close(completed=False)

        new = make_probe(client=fake, clock=clock, hang_warmup_steps=5)  # the restart: a fresh process
        step_every(new, clock, 1.0, 3, first=101)
        assert not any(watch_for(new, clock, 120))
        step_every(new, clock, 1.0, 3, first=104)  # 5 intervals now, one of them the 121 s wait
        assert watch_for(new, clock, 370).index(True) == 36  # judged: 3 x 121 s

    def test_given_no_step_yet_when_watched_then_nothing_is_published(self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)

        assert not any(watch_for(probe, clock, 3600))
        assert fake.calls == []


class TestPause:
    def test_given_a_marked_10_minute_checkpoint_save_when_watched_then_no_stall_and_flushes_say_paused(
            self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)
        last = step_every(probe, clock, 1.0, 100)

        with probe.pause("checkpoint"):
            verdicts = []
            for _ in range(10):
                verdicts += watch_for(probe, clock, 60)
                probe.flush()
        step_every(probe, clock, 1.0, 1, first=last + 1)
        verdicts += watch_for(probe, clock, 50)  # silence after the pause counts from its end
        probe.flush()

        assert not any(verdicts)
        assert set(stalled_values(fake)) == {0}
        paused = [by_metric(call).get(("Paused", JOB), {}).get("Value") for call in fake.calls]
        assert paused == [1] * 11  # every flush of a period that overlapped the pause

    def test_given_a_pause_when_it_ends_then_its_length_is_not_a_step_interval(self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)
        last = step_every(probe, clock, 1.0, 100)
        with probe.pause("evaluation"):
            clock.now += 1800
        last = step_every(probe, clock, 1.0, 5, first=last + 1)

        assert watch_for(probe, clock, 70)[-1] is True  # still the 60 s floor, not 3 x 30 minutes

    def test_given_a_pause_past_its_limit_when_watched_then_it_is_judged_a_stall(self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)
        step_every(probe, clock, 1.0, 100)

        with probe.pause("checkpoint", limit_seconds=300):
            verdicts = watch_for(probe, clock, 310)

        assert verdicts.index(True) == 30  # a save that hangs is a hang

    def test_given_nested_pauses_when_the_inner_one_ends_then_still_paused(self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)
        step_every(probe, clock, 1.0, 100)

        with probe.pause("evaluation"):
            with probe.pause("checkpoint"):
                clock.now += 30
            assert not any(watch_for(probe, clock, 300))


class TestCompletion:
    def test_given_a_stalled_job_when_closed_cleanly_then_the_last_word_is_not_stalled(self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock)
        step_every(probe, clock, 1.0, 100)
        watch_for(probe, clock, 70)

        probe.close()

        assert stalled_values(fake)[-1] == 0
        assert ("Completed", JOB) in by_metric(fake.calls[-1])
        assert probe.watch() is False  # closed: no more checks
        assert stalled_values(fake)[-1] == 0


class TestSettings:
    @pytest.mark.parametrize(("setting", "value"), [
        ("hang_floor_seconds", 0), ("hang_floor_seconds", float("inf")), ("hang_factor", 0.5),
        ("hang_warmup_steps", 0), ("hang_warmup_steps", 5000), ("hang_warmup_steps", True)])
    def test_given_a_bad_hang_setting_when_created_then_refused_naming_it(self, make_probe, setting, value):
        with pytest.raises(ValueError, match=setting):
            make_probe(**{setting: value})

    @pytest.mark.parametrize("period", [45, 90, 7, 0.7])
    def test_given_a_period_minutes_cannot_hold_evenly_when_created_then_refused_naming_the_value(
            self, make_probe, period):
        with pytest.raises(ValueError, match=f"period_seconds {period!r} does not fit"):
            make_probe(period_seconds=period)

    @pytest.mark.parametrize("period", [60, 30, 10, 1, 0.5, 120, 3600])
    def test_given_a_period_that_fits_whole_minutes_when_created_then_taken(self, make_probe, period):
        assert make_probe(period_seconds=period).period_seconds == period

    def test_given_hang_detection_off_when_steps_stop_then_no_stalled_metric_at_all(self, make_probe, fake, clock):
        probe = make_probe(client=fake, clock=clock, hang_detection=False)
        step_every(probe, clock, 1.0, 100)
        probe.flush()

        assert not any(watch_for(probe, clock, 600))
        assert stalled_values(fake) == []
