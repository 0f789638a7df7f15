"""Shared by the tests of the trident package: a seed printed with every failure (TD_SEED=n repeats it)."""
import os

import pytest

SEED = int(os.environ.get("TD_SEED", "1234"))


def pytest_report_header(config):
    return f"seed {SEED} (TD_SEED={SEED} to repeat)"


@pytest.fixture
def seed():
    return SEED
