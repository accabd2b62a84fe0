"""Serve a GGUF model with llama.cpp's own HTTP server (xllamacpp), on loopback only.

Run as ``python -m pytest_slam.swap.engines.llamacpp_main --model PATH --port N``, under the supervisor.
xllamacpp runs the server inside this process, so this module only configures it and waits for SIGTERM.
``--parallel N`` serves N requests at once (one slot per xdist worker); llama.cpp splits its context
between slots, so the context is sized to N x ``--ctx`` and each slot keeps ``--ctx`` tokens.
It dies with its supervisor (SIGKILL on parent death, armed first thing): it has no children of its
own to take down, and a SIGKILL of pytest's process group must not leave it listening.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from pytest_slam.swap.engines.supervise import SUPERVISOR_ENV, die_with_parent


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="llamacpp_main")
    p.add_argument("--model", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--alias", default=None)
    return p.parse_args(argv)


def _die_with_supervisor() -> bool:
    """SIGKILL when the supervisor goes; False when it is already gone (or was never there)."""
    supervisor = os.environ.get(SUPERVISOR_ENV)
    if not supervisor:
        return True  # run by hand, not under the supervisor
    die_with_parent(signal.SIGKILL)
    return os.getppid() == int(supervisor)


def main(argv: list[str]) -> int:
    if not _die_with_supervisor():
        return 3
    args = parse(argv)
    try:
        import xllamacpp
    except ImportError:
        print("xllamacpp is not installed: pip install 'pytest-slam[llamacpp]'", file=sys.stderr)
        return 2
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx * args.parallel
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    if args.alias:  # a set of names in recent xllamacpp (a plain string there is split in letters)
        current = params.model_alias
        params.model_alias = {args.alias} if isinstance(current, set) else args.alias
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:  # llama.cpp has logged why above; one line here, no traceback
        print(f"llamacpp_main: llama.cpp could not serve {args.model}: {exc}", file=sys.stderr)
        return 1
    print(
        f"llamacpp_main: serving {args.model} on 127.0.0.1:{args.port} with {args.parallel} "
        f"slot(s) of {args.ctx} tokens",
        flush=True,
    )
    done.wait()
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
