"""Fixtures shared by the test files: a real `sagitta serve` per test module, and a
database on each backend (embedded and remote) for the tests that run on both."""

import sys
from pathlib import Path

import pytest
import sagittadb
from oracle_checks import remote_client
from qdrant_client import QdrantClient, models
from server_process import running_server

# The repository root, for test_rag's `import rag` wherever pytest is started from.
REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A `sagitta serve` on a fresh data directory, for every test of one module."""
    with running_server(tmp_path_factory.mktemp("server-data")) as running:
        yield running


@pytest.fixture(params=["embedded", "remote"])
def database(request, tmp_path, server):
    """An embedded database in a fresh directory, then the module's server."""
    if request.param == "embedded":
        return sagittadb.open(tmp_path / "db")
    return sagittadb.connect(server.url)


@pytest.fixture(scope="module", params=["rest", "grpc"])
def api(request) -> str:
    """The API an oracle test reaches the server by: every such test runs over REST,
    then over gRPC (Qdrant's services on the gRPC port), unchanged."""
    return request.param


@pytest.fixture(scope="module")
def clients(server, api):
    """qdrant-client on the module's server over `api`, and on its local mode (the oracle)."""
    remote = remote_client(server, api)
    local = QdrantClient(":memory:")
    yield remote, local
    remote.close()
    local.close()


def recreate(client: QdrantClient, name: str, size: int, distance: str) -> None:
    """A fresh, empty collection `name` through qdrant-client (`distance`: Qdrant's name)."""
    if client.collection_exists(name):
        client.delete_collection(name)
    client.create_collection(
        name,
        vectors_config=models.VectorParams(
            size=size, distance=models.Distance(distance)
        ),
    )
