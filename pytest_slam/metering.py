"""What a call cost: its price, and token counts where the server gave none (marked estimated).

Cost of an API call is tokens times the dated price (metrics.cost); a self-hosted call is the engine
machine's hourly price times the seconds it kept it busy (its E2E), the assumption every report states.
"""

from __future__ import annotations

from typing import Any

from .records import Call, ModelSpec


def price_call(spec: ModelSpec, call: Call, prices: Any) -> None:
    """Set ``call.cost_usd``: the model's own prices, its hourly price, else the price table."""
    from .metrics.cost import api_call_cost, self_hosted_cost

    if call.cost_usd is not None or not call.ok:
        return
    if spec.hourly_usd is not None and call.e2e_ms is not None:
        call.cost_usd = self_hosted_cost(call.e2e_ms / 1000.0, spec.hourly_usd)
    elif spec.input_usd_per_mtok is not None and spec.output_usd_per_mtok is not None:
        if call.prompt_tokens is not None and call.completion_tokens is not None:
            call.cost_usd = (
                call.prompt_tokens * spec.input_usd_per_mtok
                + call.completion_tokens * spec.output_usd_per_mtok
            ) / 1e6
    else:
        call.cost_usd = api_call_cost(spec.model_id, call.prompt_tokens, call.completion_tokens, prices)


def measure(spec: ModelSpec, call: Call, prices: Any) -> None:
    """Everything the swap adds to a finished call before it is checked and reported."""
    price_call(spec, call, prices)
