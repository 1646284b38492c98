"""The public corpora the benchmarks read: the project's copy in ``../shared/data`` beside the checkout."""

from __future__ import annotations

from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# What the simulations replay: SGD's whole dev split, not the slice turkflow ships, so runs stay comparable.
SGD_DEV = SHARED_DATA / "sgd" / "dev"
