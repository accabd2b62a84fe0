"""Which tests take part, and proof that the plugin changes nothing for the others."""

from __future__ import annotations

import pytest

NO_REFERENCE = "[tool.slam]\nreference = 'none'\n"
PASSTHROUGH = """
import os, threading

def test_untouched():
    assert "OPENAI_BASE_URL" not in os.environ
    assert not [t for t in threading.enumerate() if t.name == "slam-proxy"]
"""


def _ids(result: pytest.RunResult) -> list[str]:
    return sorted(line.split(" ")[0] for line in result.stdout.lines if " PASSED" in line)


def test_suite_without_slam_gets_no_env_files_threads_or_processes(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_plain=PASSTHROUGH)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    made_by_pytester = {"stdout", "stderr", "runpytest-0", "runpytest-current"}
    assert {p.name for p in pytester.path.iterdir()} - made_by_pytester == {"test_plain.py"}
    assert "pytest-slam" not in result.stdout.str()


def test_opt_in_by_fixture_mark_module_class_and_ini_folder(
    pytester: pytest.Pytester, smollm2_endpoint: str
) -> None:
    pytester.makefile(".toml", pyproject=NO_REFERENCE)
    pytester.makeini("[pytest]\nslm_paths = llm\n")
    pytester.makepyfile(
        test_ways="""
        import pytest

        def test_fixture(slm_model): pass

        @pytest.mark.slm
        def test_mark(): pass

        @pytest.mark.slm
        class TestClass:
            def test_method(self): pass

        def test_not_opted_in(): pass
        """,
        test_module="import pytest\npytestmark = pytest.mark.slm\n\ndef test_in_module(): pass\n",
    )
    llm = pytester.mkdir("llm")
    (llm / "test_folder.py").write_text("def test_in_folder(): pass\n")
    result = pytester.runpytest(f"--slm-models={smollm2_endpoint}", "-v")
    model = "SmolLM2-135M-Instruct"
    assert _ids(result) == sorted(
        [
            f"llm/test_folder.py::test_in_folder[{model}]",
            f"test_module.py::test_in_module[{model}]",
            f"test_ways.py::TestClass::test_method[{model}]",
            f"test_ways.py::test_fixture[{model}]",
            f"test_ways.py::test_mark[{model}]",
            "test_ways.py::test_not_opted_in",
        ]
    )


def test_opt_in_from_a_folder_conftest(pytester: pytest.Pytester, smollm2_endpoint: str) -> None:
    pytester.makefile(".toml", pyproject=NO_REFERENCE)
    llm = pytester.mkdir("llm")
    (llm / "conftest.py").write_text("slm_opt_in = True\n")
    (llm / "test_a.py").write_text("def test_a(): pass\n")
    pytester.makepyfile(test_outside="def test_outside(): pass\n")
    result = pytester.runpytest(f"--slm-models={smollm2_endpoint}", "-v")
    assert _ids(result) == [
        "llm/test_a.py::test_a[SmolLM2-135M-Instruct]",
        "test_outside.py::test_outside",
    ]


def test_two_models_run_each_opted_in_test_twice(
    pytester: pytest.Pytester, smollm2_url: str
) -> None:
    pytester.makefile(
        ".toml",
        pyproject=f"""
[tool.slam]
reference = "none"
candidates = ["small", "also-small"]
[tool.slam.models.small]
base_url = "{smollm2_url}"
model = "SmolLM2-135M-Instruct"
[tool.slam.models.also-small]
base_url = "{smollm2_url}"
model = "SmolLM2-135M-Instruct"
""",
    )
    pytester.makepyfile(
        test_two="import pytest\n\n@pytest.mark.parametrize('x', [1, 2])\n"
        "@pytest.mark.slm\ndef test_x(x, slm_model): pass\n"
    )
    result = pytester.runpytest("-v")
    assert _ids(result) == [
        "test_two.py::test_x[also-small-1]",
        "test_two.py::test_x[also-small-2]",
        "test_two.py::test_x[small-1]",
        "test_two.py::test_x[small-2]",
    ]


def test_opting_in_without_enabling_slam_is_a_clear_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(slm_model): pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # one line, no collection error (first_run)
    result.stderr.fnmatch_lines(
        [
            "ERROR: pytest-slam: test_x.py::test_x opts in to model swapping, but pytest-slam is "
            "not enabled for this run*--slm-models=smollm2-135m*"
        ]
    )


def test_a_serial_run_that_selects_no_opted_in_test_starts_no_engine(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", pyproject=NO_REFERENCE)
    pytester.makepyfile(
        test_mixed="""
        import os, pytest

        def _engines():
            owner = b"--owner\\x00" + str(os.getpid()).encode() + b"\\x00"
            found = []
            for pid in os.listdir("/proc"):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        cmd = fh.read()
                except OSError:
                    continue
                # only this run's engines: other tests run engines of their own meanwhile
                if b"pytest_slam.swap.engines.supervise" in cmd and owner in cmd:
                    found.append(cmd)
            return found

        def test_plain():
            assert _engines() == []

        @pytest.mark.slm
        def test_swapped(slm_model):
            assert _engines() == []  # a serial run's engines start at the first model call
            slm_model.chat("Hi", max_tokens=1)
            assert _engines()
        """
    )
    pytester.runpytest_subprocess("-k", "plain").assert_outcomes(passed=1, deselected=1)
    pytester.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=2)
