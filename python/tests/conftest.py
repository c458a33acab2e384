import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the tests marked slow (Ray clusters, torch.distributed; docs/testing.md)")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: minutes of work or extra processes; run only with --slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow (scripts/test-python.sh --slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
