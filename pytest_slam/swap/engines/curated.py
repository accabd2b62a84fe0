"""``curated``: a reference whose answers are written by hand; never asked, never priced."""

from __future__ import annotations

from pytest_slam.records import ModelSpec
from pytest_slam.swap.engines.protocol import CostModel
from pytest_slam.swap.engines.providers import BaseProvider


class Curated(BaseProvider):
    name = "curated"
    served = False

    def cost_model(self, spec: ModelSpec) -> CostModel:
        return "none"
