"""One distribution outside pytest_slam declares a scorer and an engine; a run uses both by name.

``acme-slam`` (``ext_dist.make_dist``: a package and its ``*.dist-info``) declares ``acme-overlap``
under ``pytest_slam.scorers`` and ``acme-serve`` under ``pytest_slam.engines``. The project names
them only in ``[tool.slam]``: ``equivalence = { by = "acme-overlap" }`` and a model whose
``provider = "acme-serve"``. The engine's managed process is the fake OpenAI server, started and
stopped by pytest-slam's supervisor; the reference is a FakeOpenAI on loopback. Nothing in
pytest_slam names either part.
"""

from __future__ import annotations

import os

import pytest
from ext_dist import make_dist
from report_helpers import read_report
from slam_helpers import said

from pytest_slam.testing import FakeOpenAI

REFERENCE = "The capital of France is Paris."
ENGINE_ANSWER = "Paris is the French capital city."  # 4 words shared of 8: overlap 0.5

PACKAGE = {
    "acme_slam/__init__.py": "",
    "acme_slam/scorers.py": """
        import re

        class Overlap:
            def score(self, candidate, reference):
                a = set(re.findall(r"\\w+", candidate.lower()))
                b = set(re.findall(r"\\w+", reference.lower()))
                return len(a & b) / len(a | b) if a | b else 1.0
    """,
    "acme_slam/engine.py": """
        import sys

        from pytest_slam.swap.engines import Engine, ManagedProvider

        class ServeEngine(Engine):
            kind = "acme-serve"

            def check_available(self):
                pass

            def command(self):
                return [sys.executable, "-m", "pytest_slam.testing.fake_openai",
                        "--port", str(self.port), "--model", self.spec.model_id,
                        "--answer", str(self.spec.engine_args["answer"])]

        class Serve(ManagedProvider):
            name = "acme-serve"
            engine = ServeEngine
    """,
}

PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["acme"]
reference = "{reference}#gpt-4"
equivalence = {{ by = "acme-overlap", at_least = 0.4 }}

[tool.slam.models.acme]
provider = "acme-serve"
model = "acme-1"
engine = {{ answer = "{answer}" }}
"""

TESTS = """
import pytest
from openai import OpenAI

@pytest.mark.slm
@pytest.mark.parametrize("n", [1, 2, 3])
def test_capital(n):
    r = OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": f"Capital of France? ({n})"}])
    assert r.choices[0].message.content
"""


def test_a_distribution_s_scorer_and_engine_are_used_by_name_from_the_table(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = make_dist(
        pytester.path / "site",
        "acme-slam",
        PACKAGE,
        {
            "pytest_slam.scorers": {"acme-overlap": "acme_slam.scorers:Overlap"},
            "pytest_slam.engines": {"acme-serve": "acme_slam.engine:Serve"},
        },
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(test_capital=TESTS)
    with FakeOpenAI(REFERENCE) as reference:
        pytester.makepyprojecttoml(
            PYPROJECT.format(reference=reference.base_url, answer=ENGINE_ANSWER)
        )
        recorded = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--slm-record=new")
        assert recorded.ret == 0, recorded.stdout.str()[-3000:]
        assert reference.hits == 3  # the goldens came from the reference, once per question
        done = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--slm-report=run.json")
    assert done.ret == 0, done.stdout.str()[-3000:]
    done.stdout.fnmatch_lines(["*engine acme: acme-serve, on http://127.0.0.1:*/v1, up in *"])
    report = read_report(pytester.path / "run.json")
    (row,) = report["models"]
    assert row["model"] == "acme" and row["tests_passed"] == 3 and row["calls"] == 3
    assert row["equivalence_by_scorer"] == {"acme-overlap": 0.5}  # the report names the scorer
    scores = [s for o in report["outcomes"] for p in o["pairs"] for s in p["scores"]]
    assert {(s["scorer"], s["value"], s["verdict"]) for s in scores} == {
        ("acme-overlap", 0.5, "equivalent")
    }
    calls = [c for o in report["outcomes"] for c in o["calls"] if not c["cold_start"]]
    answers = {c["text"] for c in calls}
    assert answers == {ENGINE_ANSWER}  # every call reached the engine the distribution declared
    assert "acme" in said(done)
