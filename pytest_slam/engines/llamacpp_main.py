"""Serve a GGUF model with llama.cpp's own HTTP server (xllamacpp), on loopback only.

Run as ``python -m pytest_slam.engines.llamacpp_main --model PATH --port N``, under the supervisor.
xllamacpp runs the server inside this process, so this module only configures it and waits for SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="llamacpp_main")
    p.add_argument("--model", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--alias", default=None)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
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
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    if args.alias:
        params.model_alias = args.alias
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:  # llama.cpp has logged why above; one line here, no traceback
        print(f"llamacpp_main: llama.cpp could not serve {args.model}: {exc}", file=sys.stderr)
        return 1
    print(f"llamacpp_main: serving {args.model} on 127.0.0.1:{args.port}", flush=True)
    done.wait()
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
