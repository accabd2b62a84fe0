"""A real judge measured against people (issue 28): SmolLM2-135M on llama.cpp as ``[tool.slam]
judge``, ``by = "judge"``, on pairs of the human-judged QA set EVOUNA-NQ, through ``slam calibrate
--evaluate``.

    python bench/bench_judge_human.py [--pairs 200] [--url http://127.0.0.1:PORT/v1]
                                      [--project DIR] [--chunk 20]

The pairs (``validity_data.evouna_nq``, each with its question) are taken one per prompt, every
k-th prompt, so they spread over the set. The embedded model is started as the root conftest's
engine fixture starts it (``swap.engines.start_engine``), unless ``--url`` names a running one. The
pairs are evaluated ``--chunk`` at a time (each chunk's verdicts kept in ``DIR/.slam/judge``, so an
interrupted measurement resumes where it stopped), then once more on all of them: that last
evaluation replays every verdict and asks nothing. Prints the JSON result and the text.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from validity_data import DATA, evouna_nq

TREE = Path(__file__).resolve().parents[1]
MODEL_ID = "SmolLM2-135M-Instruct"


def questions() -> dict[str, str]:
    with (DATA / "evouna_nq_human_judged" / "records.jsonl").open(encoding="utf-8") as f:
        return {f"nq-{r['idx']}": r["question"] for r in map(json.loads, f)}


def sample(n: int) -> list[dict[str, object]]:
    asked = questions()
    by_prompt: dict[str, list] = {}
    for p in evouna_nq():
        by_prompt.setdefault(p.unit, []).append(p)
    units = sorted(by_prompt, key=lambda u: int(u.split("-")[1]))
    step = max(1, len(units) // n)
    out = []
    for i, unit in enumerate(units[::step][:n]):
        p = by_prompt[unit][i % len(by_prompt[unit])]  # the systems in turn
        out.append({"candidate": p.candidate, "reference": p.reference, "label": p.label,
                    "unit": unit, "question": asked[unit]})  # fmt: skip
    return out


def evaluate(project: Path, what: str) -> tuple[float, str]:
    env = os.environ | {"PYTHONPATH": str(TREE)}
    cmd = [sys.executable, "-m", "pytest_slam.cli", "calibrate", "--evaluate", "labels.jsonl"]
    start = time.perf_counter()
    done = subprocess.run([*cmd, *what.split()], cwd=project, env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"slam calibrate failed: {done.stdout}{done.stderr}")
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--url", default=None)
    parser.add_argument("--project", type=Path, default=None)
    parser.add_argument("--chunk", type=int, default=20)
    args = parser.parse_args()
    server = None
    url = args.url
    if url is None:
        from pytest_slam.swap.engines import start_engine
        from pytest_slam.swap.models import resolve

        spec = resolve("smollm2-135m")
        server = start_engine(spec, Path(tempfile.mkdtemp()), timeout_s=300)
        url = spec.base_urls[0]
    try:
        project = args.project or Path(tempfile.mkdtemp())
        project.mkdir(parents=True, exist_ok=True)
        rows = sample(args.pairs)
        (project / "pyproject.toml").write_text(
            f'[tool.slam]\njudge = "{url}#{MODEL_ID}"\nequivalence = {{ by = "judge" }}\n'
        )
        good = sum(bool(r["label"]) for r in rows)
        print(f"{len(rows)} EVOUNA-NQ pairs ({good} judged correct by people), "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        for start in range(0, len(rows), args.chunk):
            done = rows[: start + args.chunk]
            (project / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in done))
            wall, out = evaluate(project, "--format json")
            asked = json.loads(out).get("judge", {}).get("asked")
            print(f"{len(done)} pairs: {wall:.0f} s wall, {asked} call(s)", flush=True)
        wall, out = evaluate(project, "--format json")
        print(f"last evaluation (replays): {wall:.1f} s wall\n\n{out}")
        print(evaluate(project, "")[1])
        print(f"load after {os.getloadavg()[0]:.1f}")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
