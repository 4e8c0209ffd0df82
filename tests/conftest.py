import os

import pytest
from hypothesis import HealthCheck, settings

# CI machines are small and shared; keep hypothesis thorough but bounded.
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def http_server():
    """A real HTTP server on 127.0.0.1, stopped after the test whatever happens."""
    from tests.http_server import LocalServer

    server = LocalServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def dataset_root(tmp_path, monkeypatch):
    """A fresh dataset root for the test, through the environment variable."""
    import dataset_kit

    root = tmp_path / "root"
    monkeypatch.setenv("DATASET_KIT_DATASET_ROOT", str(root))
    monkeypatch.delenv("DATASET_KIT_OFFLINE", raising=False)
    dataset_kit.set_dataset_root(None)
    yield root
    dataset_kit.set_dataset_root(None)
