"""Writes side by side (cluster/parallel.py): at most the limit in flight, results in call order, the first error
after the calls in flight finished and none started after it; and retries per thread (retry.py)."""
from __future__ import annotations

import threading
import time

from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.parallel import NOT_RUN, done, run_bounded
from ansible_collections.kubegpu.platform.plugins.module_utils.cluster.retry import Retrier, RetryPolicy, StatusFault


def test_at_most_the_limit_in_flight_and_results_in_call_order():
    lock, state = threading.Lock(), {"now": 0, "most": 0}

    def call(i):
        def run():
            with lock:
                state["now"] += 1
                state["most"] = max(state["most"], state["now"])
            time.sleep(0.01 * (5 - i % 5))   # later calls finish first
            with lock:
                state["now"] -= 1
            return i
        return run

    results, error = run_bounded([call(i) for i in range(40)], 4)
    assert error is None
    assert results == list(range(40))
    assert 1 < state["most"] <= 4


def test_the_first_error_in_call_order_stops_what_has_not_started():
    started = []

    def call(i):
        def run():
            started.append(i)
            if i in (3, 5):
                raise ValueError("node {0}".format(i))
            time.sleep(0.005)
            return i
        return run

    results, error = run_bounded([call(i) for i in range(200)], 2)
    assert str(error) == "node 3"
    assert results[:3] == [0, 1, 2] and results[3] is NOT_RUN
    assert len(started) < 200
    assert done(results) == [r for r in results if r is not NOT_RUN]


def test_one_at_a_time_stops_at_the_first_error_as_a_loop():
    def fail():
        raise ValueError("x")
    results, error = run_bounded([lambda: 1, fail, lambda: 3], 1)
    assert results == [1, NOT_RUN, NOT_RUN] and str(error) == "x"


def test_each_thread_retries_its_own_request():
    # A request nested in one thread's write must not make another thread's outermost request look nested
    # (it would then not be retried at all).
    retrier = Retrier(RetryPolicy(budget=30, base=0.001, cap=0.002, rng=lambda: 0.0), sleep=lambda s: None)
    inside = threading.Event()
    release = threading.Event()
    tries = {"b": 0}

    def holder():
        def send():
            inside.set()
            release.wait(5)
            return "a"
        return retrier.call("a", send)

    def flaky():
        tries["b"] += 1
        if tries["b"] < 3:
            raise StatusFault(503, "Service Unavailable")
        return "b"

    def other():
        inside.wait(5)
        try:
            return retrier.call("b", flaky)
        finally:
            release.set()

    results, error = run_bounded([holder, other], 2)
    assert error is None and results == ["a", "b"]
    assert tries["b"] == 3 and retrier.counts["5xx"] == 2
