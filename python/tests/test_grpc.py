"""Qdrant's gRPC API of `sagitta serve` (the oracle tests run over it too, through the
`api` fixture): the .proto against qdrant-client's own descriptors, API keys in the
`api-key` metadata, errors as Qdrant's status codes naming the field, RPCs not served,
the message size limit, snapshots, and the port turned off.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from qdrant_client import QdrantClient, models
from qdrant_client import grpc as qgrpc
from server_process import REPO_ROOT, SagittaServer, running_server

PROTO = REPO_ROOT / "crates" / "sagitta-server" / "proto" / "qdrant.proto"
RW_KEY = "grpc-read-write-key"
RO_KEY = "grpc-read-only-key"


def compiled_proto(tmp_path: Path) -> descriptor_pb2.FileDescriptorSet:
    """Our proto compiled by protoc (grpcio-tools), as descriptors."""
    import grpc_tools

    includes = Path(grpc_tools.__file__).parent / "_proto"
    out = tmp_path / "qdrant.pb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO.parent}",
            f"-I{includes}",
            f"--descriptor_set_out={out}",
            PROTO.name,
        ],
        check=True,
    )
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def _fields(message: descriptor_pb2.DescriptorProto) -> dict[str, tuple]:
    oneofs = [o.name for o in message.oneof_decl]
    return {
        f.name: (
            f.number,
            f.type,
            f.label,
            f.type_name,
            oneofs[f.oneof_index] if f.HasField("oneof_index") else None,
        )
        for f in message.field
    }


def test_the_proto_is_qdrant_clients_wire_contract(tmp_path: Path) -> None:
    """Every message, enum and RPC of our proto is, field by field, what qdrant-client's
    stubs put on the wire (names, numbers, types, oneofs)."""
    ours = compiled_proto(tmp_path)
    # importing the client's stubs registers its descriptors in the default pool
    assert qgrpc.PointsStub is not None
    pool = descriptor_pool.Default()
    (ours_file,) = [f for f in ours.file if f.name == PROTO.name]

    def check_message(message: descriptor_pb2.DescriptorProto, scope: str) -> int:
        name = f"{scope}.{message.name}"
        theirs = descriptor_pb2.DescriptorProto()
        pool.FindMessageTypeByName(name).CopyToProto(theirs)
        assert _fields(message) == _fields(theirs), name
        checked = 1
        for nested in message.nested_type:
            if not nested.options.map_entry:
                checked += check_message(nested, name)
        return checked

    checked = sum(check_message(m, "qdrant") for m in ours_file.message_type)
    assert checked > 200
    for enum in ours_file.enum_type:
        theirs = pool.FindEnumTypeByName(f"qdrant.{enum.name}")
        assert {v.name: v.number for v in enum.value} == {
            v.name: v.number for v in theirs.values
        }, enum.name
    served = 0
    for service in ours_file.service:
        theirs = pool.FindServiceByName(f"qdrant.{service.name}")
        for method in service.method:
            their = theirs.FindMethodByName(method.name)
            assert method.input_type == f".{their.input_type.full_name}", method.name
            assert method.output_type == f".{their.output_type.full_name}", method.name
            served += 1
    # health check 1, Collections 9, Points 28, Snapshots 6
    assert served == 44, served


@pytest.fixture(scope="module")
def keyed(tmp_path_factory) -> Iterator[SagittaServer]:
    flags = ("--api-key", RW_KEY, "--read-only-api-key", RO_KEY)
    with running_server(tmp_path_factory.mktemp("grpc-keys"), *flags) as server:
        yield server


def grpc_client(server: SagittaServer, key: str | None) -> QdrantClient:
    return QdrantClient(
        url=server.url,
        grpc_port=server.grpc_port or 6334,
        prefer_grpc=True,
        api_key=key,
        https=False,
        timeout=30,
    )


def refused(call, code: grpc.StatusCode) -> str:
    with pytest.raises(grpc.RpcError) as error:
        call()
    assert error.value.code() == code, error.value
    return error.value.details()


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
def test_keys_go_in_the_api_key_metadata(keyed: SagittaServer) -> None:
    writer = grpc_client(keyed, RW_KEY)
    reader = grpc_client(keyed, RO_KEY)
    anonymous = grpc_client(keyed, None)
    writer.create_collection(
        "keyed", vectors_config=models.VectorParams(size=2, distance="Dot")
    )
    writer.upsert("keyed", [models.PointStruct(id=1, vector=[1.0, 0.0])], wait=True)
    # the read-only key reads, and may not write
    assert reader.count("keyed").count == 1
    hits = reader.query_points("keyed", query=[1.0, 0.0], limit=1).points
    assert [hit.id for hit in hits] == [1]
    message = refused(
        lambda: reader.upsert("keyed", [models.PointStruct(id=2, vector=[0.0, 1.0])]),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    assert "read-only" in message, message
    refused(
        lambda: reader.delete_collection("keyed"), grpc.StatusCode.PERMISSION_DENIED
    )
    assert writer.count("keyed").count == 1
    # no key, or a wrong one
    message = refused(lambda: anonymous.count("keyed"), grpc.StatusCode.UNAUTHENTICATED)
    assert "api-key" in message, message
    wrong = grpc_client(keyed, "not-the-key")
    refused(lambda: wrong.get_collections(), grpc.StatusCode.UNAUTHENTICATED)
    # the health check stays open, as REST's `/` does
    with grpc.insecure_channel(f"127.0.0.1:{keyed.grpc_port}") as channel:
        reply = qgrpc.QdrantStub(channel).HealthCheck(qgrpc.HealthCheckRequest())
    assert reply.version


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Iterator[SagittaServer]:
    flags = ("--max-request-bytes", "65536")
    with running_server(tmp_path_factory.mktemp("grpc-small"), *flags) as server:
        yield server


def test_errors_are_qdrants_status_codes_naming_the_field(small: SagittaServer) -> None:
    client = grpc_client(small, None)
    message = refused(
        lambda: client.get_collection("missing"), grpc.StatusCode.NOT_FOUND
    )
    assert message == "Not found: Collection `missing` doesn't exist!", message
    client.create_collection(
        "errors", vectors_config=models.VectorParams(size=3, distance="Cosine")
    )
    refused(
        lambda: client.create_collection(
            "errors", vectors_config=models.VectorParams(size=3, distance="Cosine")
        ),
        grpc.StatusCode.ALREADY_EXISTS,
    )
    message = refused(
        lambda: client.upsert("errors", [models.PointStruct(id=1, vector=[1.0, 2.0])]),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "dim" in message, message
    with grpc.insecure_channel(f"127.0.0.1:{small.grpc_port}") as channel:
        points = qgrpc.PointsStub(channel)
        # a condition of no kind: refused, naming the filter
        empty = qgrpc.Filter(must=[qgrpc.Condition()])
        message = refused(
            lambda: points.Count(
                qgrpc.CountPoints(collection_name="errors", filter=empty)
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        )
        assert message.startswith("filter:"), message
        # a bad filter value is refused by the REST handler, with its message
        bad_range = qgrpc.Filter(
            must=[
                qgrpc.Condition(
                    field=qgrpc.FieldCondition(key="", range=qgrpc.Range(lt=1.0))
                )
            ]
        )
        message = refused(
            lambda: points.Count(
                qgrpc.CountPoints(collection_name="errors", filter=bad_range)
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        )
        assert "key" in message, message
        # an inference object needs an inference service
        document = qgrpc.PointStruct(
            id=qgrpc.PointId(num=5),
            vectors=qgrpc.Vectors(
                vector=qgrpc.Vector(document=qgrpc.Document(text="hi", model="m"))
            ),
        )
        message = refused(
            lambda: points.Upsert(
                qgrpc.UpsertPoints(collection_name="errors", points=[document])
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        )
        assert message.startswith("vector:"), message
        # a message over --max-request-bytes: refused by tonic's decoder, as Qdrant's
        wide = [
            qgrpc.PointStruct(
                id=qgrpc.PointId(num=n),
                vectors=qgrpc.Vectors(vector=qgrpc.Vector(data=[0.5, 0.5, 0.5])),
                payload={"text": qgrpc.Value(string_value="x" * 1_000)},
            )
            for n in range(100)
        ]
        refused(
            lambda: points.Upsert(
                qgrpc.UpsertPoints(collection_name="errors", points=wide)
            ),
            grpc.StatusCode.OUT_OF_RANGE,
        )
        # an RPC of Qdrant's this server does not serve
        collections = qgrpc.CollectionsStub(channel)
        refused(
            lambda: collections.CollectionClusterInfo(
                qgrpc.CollectionClusterInfoRequest(collection_name="errors")
            ),
            grpc.StatusCode.UNIMPLEMENTED,
        )
    assert client.count("errors").count == 0


def test_snapshots_over_grpc(small: SagittaServer) -> None:
    client = grpc_client(small, None)
    client.create_collection(
        "snap", vectors_config=models.VectorParams(size=2, distance="Euclid")
    )
    client.upsert(
        "snap",
        [models.PointStruct(id=n, vector=[float(n), 1.0]) for n in range(10)],
        wait=True,
    )
    made = client.create_snapshot("snap")
    assert made is not None and made.size > 0
    assert made.creation_time is not None
    assert [s.name for s in client.list_snapshots("snap")] == [made.name]
    assert client.delete_snapshot("snap", made.name)
    assert client.list_snapshots("snap") == []
    full = client.create_full_snapshot()
    assert full is not None
    assert full.name in [s.name for s in client.list_full_snapshots()]
    client.delete_full_snapshot(full.name)
    assert full.name not in [s.name for s in client.list_full_snapshots()]


def test_grpc_port_0_turns_grpc_off(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", "--grpc-port", "0") as server:
        assert server.grpc_port is None
        assert "gRPC off" in server.output()
