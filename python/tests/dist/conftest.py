"""Fixtures of weft.dist's tests, which run under mpirun with every rank running pytest
(scripts/dist_test.sh). Outside mpirun, or in a group of one, the folder is not collected: the
plain ``pytest python/tests`` run leaves it out."""
import os

import pytest


def mpi_world_size():
    """The number of processes mpirun started (1 outside mpirun)."""
    for var in ("OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"):
        if os.environ.get(var):
            return int(os.environ[var])
    return 1


if mpi_world_size() < 2:
    collect_ignore_glob = ["test_*.py"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "breaks_group: leaves the process group unusable; runs after every other test")


def pytest_collection_modifyitems(config, items):
    # Every rank runs the same tests in the same order (collectives match across ranks); a test
    # after which the group may be unusable goes last.
    items.sort(key=lambda item: item.get_closest_marker("breaks_group") is not None)


@pytest.fixture(scope="session", autouse=True)
def group():
    """The process group, joined once per pytest session. Fusion buffers of 1 MiB, so that the
    large-tensor tests go past one buffer while the many-small tests fit several per buffer."""
    import weft.dist as dist

    dist.init(fusion_bytes=1 << 20)
    assert dist.size() == mpi_world_size()
    yield dist
