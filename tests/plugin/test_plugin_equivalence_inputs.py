"""Bad input to the scorers in real pytest sessions: an embedding endpoint that is down, an answer that
is not JSON, an empty one, a huge one, and a scorer whose optional extra is not installed. Each fails
its own test with a message a person can act on; the run itself goes on to its summary.

The candidate is a FakeOpenAI server (a hosted model, as ``openai:gpt-4o-mini`` would be): only a
scripted model gives these answers on demand.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_slam.testing import FakeOpenAI

HUGE_WORDS = 20_000

BAD_ANSWERS = {
    "Give me JSON": "Sure! The category is billing and the urgency is high.",
    "Say nothing": "",
    "Write a lot": "word " * HUGE_WORDS,
}


def _candidate_answer(request: dict) -> str:
    prompt = request["messages"][-1]["content"]
    return BAD_ANSWERS.get(prompt, "GPT-4 says: " + prompt)


@pytest.fixture
def candidate() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(answer=_candidate_answer, model="cand") as server:
        yield server


@pytest.fixture
def embeddings_down() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(embeddings_down=True, model="embedder") as server:
        yield server


def test_bad_answers_and_a_dead_embedder_fail_their_own_tests_readably(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, candidate: FakeOpenAI,
    embeddings_down: FakeOpenAI,
) -> None:  # fmt: skip
    pytester.makefile(".toml", pyproject=f"[tool.slam]\nreference = '{fake_gpt4.base_url}#gpt-4'\n")
    pytester.makepyfile(test_inputs=f"""
        import pytest

        pytestmark = pytest.mark.slm

        @pytest.mark.slm_equivalence(by="json", at_least=1.0)
        def test_not_json(slm_model):
            slm_model.chat("Give me JSON")

        @pytest.mark.slm_equivalence(by="fuzzy", at_least=0.5)
        def test_empty(slm_model):
            slm_model.chat("Say nothing")

        @pytest.mark.slm_equivalence(by="fuzzy", at_least=0.5)
        def test_huge(slm_model):
            slm_model.chat("Write a lot")

        @pytest.mark.slm_equivalence(by="semantic", backend="endpoint", at_least=0.5,
                                     base_url="{embeddings_down.base_url}", model="embedder")
        def test_embedder_down(slm_model):
            slm_model.chat("Compare me")

        @pytest.mark.slm_equivalence(by="fuzzy", at_least=0.9)
        def test_fine(slm_model):
            slm_model.chat("Say hello")
        """)  # fmt: skip
    result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-record=new")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=4)
    result.stdout.fnmatch_lines_random([
        "*call 1: equivalence 0.00 < 1.00 (json): reference is not valid JSON*",
        "*call 1: the candidate answered nothing (empty or whitespace only); the reference did "
        "(certain) (pytest-slam, cand)",
        "*call 1: equivalence 0.* < 0.50 (fuzzy): token_sort_ratio *",
        "*call 1: scorer 'semantic': *embedder*HTTP 503*overloaded*",
        "*pytest-slam swap verdict*",
    ])  # fmt: skip
    huge = [line for line in result.outlines if "(fuzzy): token_sort_ratio" in line]
    assert huge and all(len(line) < 500 for line in huge)  # a verdict line, not the answer
    assert "word word word word word word word word word word" not in result.stdout.str()


def test_not_json_candidate_against_a_json_reference(
    pytester: pytest.Pytester, candidate: FakeOpenAI
) -> None:
    with FakeOpenAI(answer='{"category": "billing", "urgency": "high"}', model="gpt-4") as ref:
        pytester.makefile(".toml", pyproject=f"[tool.slam]\nreference = '{ref.base_url}#gpt-4'\n")
        pytester.makepyfile(test_json="""
            import pytest

            @pytest.mark.slm
            @pytest.mark.slm_equivalence(by="json", at_least=1.0)
            def test_triage(slm_model):
                slm_model.chat("Give me JSON")
            """)  # fmt: skip
        result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-record=new")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*call 1: equivalence 0.00 < 1.00 (json): candidate is not valid JSON: *"
    ])  # fmt: skip


def test_a_scorer_whose_extra_is_missing_names_the_extra(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, candidate: FakeOpenAI
) -> None:
    """In a fresh process where sentence-transformers cannot be imported (the extra is installed here)."""
    pytester.makefile(".toml", pyproject=f"[tool.slam]\nreference = '{fake_gpt4.base_url}#gpt-4'\n")
    pytester.makeconftest("import sys\nsys.modules['sentence_transformers'] = None\n")
    pytester.makepyfile(test_semantic="""
        import pytest

        @pytest.mark.slm
        @pytest.mark.slm_equivalence(by="semantic", at_least=0.5)
        def test_similar(slm_model):
            slm_model.chat("Say hello")
        """)  # fmt: skip
    result = pytester.runpytest_subprocess(f"--slm-models={candidate.base_url}#cand",
                                           "--slm-record=new")  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        # Which packages are missing depends on the machine (torch may be absent too).
        "*scorer 'semantic': the semantic scorer needs *sentence-transformers*, which * not "
        "installed: install CPU torch first with `pip install torch==2.13.0`, "
        "then pip install 'pytest-slam?semantic?' (pytest-slam, cand)"
    ])  # fmt: skip
