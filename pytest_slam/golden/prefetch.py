"""A refresh's reference answers fetched ahead (``--slm-record=all``, ``slam golden refresh``).

A refresh asks the real reference for every golden answer the tests ask for, and pytest runs one
test at a time, so the reference would be asked one request at a time. The requests are known: the
goldens hold them. Those that depend on no earlier answer (run/fetching.py's rule) are sent ahead,
concurrently, within the reference's limit and a window of the tests about to run
(swap/ahead.py ``FetchQueue``). A recording takes the fetched call only when it is the very request
sent (the same golden key and upstream body), with the timings measured when it was sent; anything
else is asked live. The reference's answer does not depend on which test asks (a run records each
entry once, for whichever test asks first), so any test of the module claims it. Only an answer a
test asked for is recorded: one no test claims is counted unused and never written. A fetched call
is the same ``ReferenceService.ask`` as a live one, retries included, so it fails as one would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pytest_slam.records import Call, ModelSpec
from pytest_slam.swap.ahead import FetchQueue, Planned
from pytest_slam.swap.chat import FLIGHT_LABEL, ChatResult, upstream_body
from pytest_slam.swap.limits import Limiter
from pytest_slam.swap.upstream import JSONObject

# ``body``, and ``stop`` set when the run ends: the answer, the failure its caller raises, or None
# (stopped before it was asked)
Ask = Callable[[JSONObject, threading.Event], "Call | Exception | None"]


def reference_request(body: JSONObject) -> JSONObject:
    """What the reference is sent for a request: the product's body, unstreamed (a golden answer
    is one completion, whoever streamed it)."""
    return {k: v for k, v in body.items() if k not in ("stream", "stream_options")}


class ReferenceQueue(FetchQueue):
    """The reference's requests of the tests about to run, fetched ahead during a refresh."""

    def __init__(self, spec: ModelSpec, limiter: Limiter, ask: Ask) -> None:
        super().__init__(spec.name, limiter)
        self.spec, self._ask = spec, ask

    def sent_body(self, planned: Planned) -> JSONObject:
        return self.sent_for(planned.body)

    def sent_for(self, body: JSONObject) -> JSONObject:
        """The upstream body of a request, as ``forward_chat`` sends it to the reference."""
        return upstream_body(reference_request(body), self.spec)

    def _fetch(self, planned: Planned) -> None:
        # the reference's place under its limit is taken inside ``ask``: a claim waits from here
        if not self._admit(planned):
            self._finish(planned, None, [], 0)
            return
        token = FLIGHT_LABEL.set(f"fetched ahead for {planned.nodeid}")
        try:
            asked = self._ask(planned.body, self._stop)
        except Exception as exc:  # a fault of the swap, not the reference's: asked live instead
            self._finish(planned, None, [], 0, repr(exc))
            return
        finally:
            FLIGHT_LABEL.reset(token)
        if isinstance(asked, Exception):  # the reference failed: raised to the recording
            self._finish(planned, None, [], 0, failure=asked)
        else:
            self._finish(planned, None if asked is None else ChatResult(asked), [], 0)

    def plan(self, planned: list[Planned]) -> None:
        """Queue these requests (in test order); nothing once the run has ended."""
        if self._stop.is_set():
            return
        for one in planned:
            self.add(one)

    def asked(self, module: str, key: str, body: JSONObject) -> Call | None:
        """The fetched call for this request of ``module``, when it is the very one sent (waited
        for while in flight); its failure raised; None: ask it live."""
        planned = self.claim(module, key, self.sent_for(body))
        if planned is None:
            return None
        planned.done.wait()
        if planned.failure is not None:
            raise planned.failure
        return planned.result.call if planned.result is not None else None
