"""The one default equivalence verdict, chosen by the validity benchmark (bench/bench_validity.py).

fuzzy (token_sort_ratio) >= 0.7. Measured across data sets (threshold chosen on one, tested on the
other; bench/README.md "Validity"): no fixed or calibrated single threshold beat 0.7 in both
directions, and 0.8 (``assert_equivalent``'s old default) had the lower kappa in both. It is a weak
verdict on open-ended answers (kappa 0.03-0.19 with a judge): ``slam calibrate``, a judge or
structured scorers are stronger, and the README says so.
"""

from __future__ import annotations

DEFAULT_SCORER = "fuzzy"  # FuzzyScorer's default method is token_sort_ratio
DEFAULT_AT_LEAST = 0.7
