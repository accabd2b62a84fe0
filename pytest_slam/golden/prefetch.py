"""A refresh's reference answers fetched ahead (``--slm-record=all``, ``slam golden refresh``).

A refresh asks the real reference for every golden answer the tests ask for, and pytest runs one
test at a time, so the reference would be asked one request at a time. The requests are known: the
goldens hold them. Those that depend on no earlier answer (run/test/fetching.py's rule) are queued on
the reference's broker (swap/ahead.py ``Fetches``, swap/broker.py), in test order, within its limit
and a window of the tests about to run. A recording takes the fetched call only when it is the very
request sent (the same golden key and upstream body, swap/request.py ``for_reference``), with the
timings measured when it was sent; anything else is asked live. The reference's answer does not
depend on which test asks (a run records each entry once, for whichever test asks first), so any
test of the module claims it. Only an answer a test asked for is recorded: one no test claims is
counted unused and never written. A fetched call is the same ``ReferenceService.ask`` as a live
one, retries included, so it fails as one would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pytest_slam.records import Call, ModelSpec
from pytest_slam.swap.ahead import Fetched, Fetches, Planned
from pytest_slam.swap.broker import Job, waited
from pytest_slam.swap.chat import FLIGHT_LABEL, ChatResult
from pytest_slam.swap.limits import Limiter
from pytest_slam.swap.request import Request, for_reference
from pytest_slam.swap.upstream import JSONObject

# ``body``, and ``stop`` set when the run ends: the answer, the failure its caller raises, or None
# (stopped before it was asked)
Ask = Callable[[JSONObject, threading.Event], "Call | Exception | None"]


class ReferenceQueue(Fetches):
    """The reference's requests of the tests about to run, fetched ahead during a refresh;
    ``longest``: the most a recording waits for one in flight (every try's timeout)."""

    def __init__(self, spec: ModelSpec, limiter: Limiter, ask: Ask, longest: float) -> None:
        super().__init__(spec.name, limiter)
        self.spec, self._ask, self.longest = spec, ask, longest

    def request_for(self, planned: Planned) -> Request:
        return for_reference(planned.body, self.spec, planned.key)

    def fetch(self, planned: Planned, job: Job[Fetched]) -> Fetched:
        # the reference's place under its limit is taken inside ``ask``: a claim waits from here
        job.sent()
        token = FLIGHT_LABEL.set(f"fetched ahead for {planned.nodeid}")
        try:
            asked = self._ask(planned.body, job.stop)
        finally:
            FLIGHT_LABEL.reset(token)
        if isinstance(asked, Exception):  # the reference failed: raised to the recording
            return Fetched(failure=asked)
        return Fetched(None if asked is None else ChatResult(asked))

    def plan(self, planned: list[Planned]) -> None:
        """Queue these requests (in test order); nothing once the run has ended."""
        for one in planned:
            if not self.server.stop.is_set():
                self.add(one)

    def asked(self, module: str, key: str, body: JSONObject) -> Call | None:
        """The fetched call for this request of ``module``, when it is the very one sent (waited
        for while in flight); its failure raised; None: ask it live."""
        planned = self.claim(module, key, for_reference(body, self.spec).sent)
        if planned is None or planned.job is None:
            return None
        if not waited(planned.job, None, self.longest):
            return None
        ended = planned.ended
        if ended.failure is not None:
            raise ended.failure
        return ended.result.call if ended.result is not None else None
