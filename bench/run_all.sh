#!/usr/bin/env bash
# Regenerate every table in bench/README.md, one bench after another (about 35 minutes on 2 cores).
# Each writes bench/results/NAME.md (git-ignored); paste them into bench/README.md.
# Run it on a machine nobody else is using if you can: every table prints the load average.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p results
run() { local name=$1; shift; echo "== $name"; python "$@" | tee "results/$name.md"; }
run swap_hop bench_swap_hop.py --profile
run overhead bench_overhead.py
run overhead_1000 bench_overhead.py --cases 1000 --base 200 --repeats 5
run profile_run profile_run.py
run size bench_size.py --pairs 5 --record-repeats 3
run misses bench_misses.py
run async bench_async.py --pairs 5
run scaling bench_scaling.py
run golden bench_golden.py
run golden_merge bench_golden_merge.py
run scorers bench_scorers.py
run engine bench_engine.py
run engine_slots bench_engine_slots.py
run validity validity.py
run validity_loose validity.py --max-pass-error 0.10 --max-fail-error 0.20
run html_size html_size.py --shots screenshots
run html_build bench_html.py
run json_report bench_json_report.py
