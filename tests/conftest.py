import os
import socket
import urllib.request

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3(monkeypatch):
    """A moto S3 server on 127.0.0.1 with bucket ``data``; yields fsspec storage options."""
    moto_server = pytest.importorskip("moto.server", reason="S3 tests need moto[server]")
    pytest.importorskip("s3fs", reason="S3 tests need s3fs (the stream extra)")
    import boto3
    import s3fs

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        # moto keeps its buckets in process-wide state: start every test empty.
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset",
                                                      method="POST"), timeout=30).close()
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket="data")
        s3fs.S3FileSystem.clear_instance_cache()
        yield {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    finally:
        server.stop()
