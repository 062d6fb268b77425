"""Reliability figures: many rows through a judge endpoint that faults about a quarter of all requests.

    .venv/bin/python benchmarks/bench_faults.py [--rows 2000] [--fault-rate 0.28] [--seed 7]

See ``benchmarks/faults.py`` for the faults (429 with and without Retry-After, 500, 503, slow
replies past the timeout, connection resets, invalid JSON, wrong shape, wrong number of verdicts, truncation)
and the rows that are made to fail for good. Prints what was injected and how every row ended.
"""

from __future__ import annotations

import argparse

from faults import run_fault_scenario  # beside this script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--fault-rate", type=float, default=0.28)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    report = run_fault_scenario(args.rows, fault_rate=args.fault_rate, seed=args.seed)
    print("\n".join(report.lines()))


if __name__ == "__main__":
    main()
