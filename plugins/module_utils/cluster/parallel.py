# -*- coding: utf-8 -*-
# Copyright: kubegpu.platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Independent writes sent side by side, at most `parallel_writes` in flight.

A thousand label patches sent one after the other cost a thousand round trips; the API server serves them side by
side just as well (API Priority and Fairness queues what it cannot take, answering 429, which the retrier waits
out). Each call keeps its own retries (retry.py: a thread's nested calls do not retry again, per thread), and what
must come in order stays in order: callers only hand over writes that do not depend on each other, and run the
next group after this one returns.

On the first error no further call starts; those in flight finish, so that nothing is left half sent, and the
results and the error come back in call order, as a loop that stopped at that call would have them.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
from concurrent.futures import ThreadPoolExecutor

DEFAULT_PARALLEL_WRITES = 40
NOT_RUN = object()


def run_bounded(calls, limit):
    """Run the no-argument `calls`, at most `limit` at once. Returns (results, error): results[i] is what calls[i]
    returned, or NOT_RUN when it did not run or raised; error is the exception of the first call (in order) that
    raised, or None."""
    calls = list(calls)
    results = [NOT_RUN] * len(calls)
    errors = [None] * len(calls)
    if limit <= 1 or len(calls) <= 1:
        for index, call in enumerate(calls):
            try:
                results[index] = call()
            except Exception as e:  # handed back to the caller, who raises it after recording what was done
                return results, e
        return results, None
    stop = threading.Event()

    def one(index):
        if stop.is_set():
            return
        try:
            results[index] = calls[index]()
        except Exception as e:  # see above
            errors[index] = e
            stop.set()

    with ThreadPoolExecutor(max_workers=min(limit, len(calls))) as pool:
        list(pool.map(one, range(len(calls))))
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        # A later call that had already finished when an earlier one failed is kept; order of results is call order.
        failed_at = errors.index(first)
        for index in range(failed_at + 1, len(calls)):
            if errors[index] is not None:
                results[index] = NOT_RUN
    return results, first


def done(results):
    """The results of the calls that ran, in order."""
    return [r for r in results if r is not NOT_RUN]
