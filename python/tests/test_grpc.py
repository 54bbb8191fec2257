"""Qdrant's gRPC API of `sagitta serve` (the oracle tests run over it too, through the
`api` fixture): the .proto against qdrant-client's own descriptors, API keys in the
`api-key` metadata, errors as Qdrant's status codes naming the field, RPCs not served,
the message size limit, snapshots, the port turned off, and gRPC connections under the
REST listener's timeouts and caps.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import h2.config
import h2.connection
import h2.events
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


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` (end of stream or reset) within `seconds`; bytes it
    sends first (an HTTP/2 GOAWAY, an HTTP/1 answer) are read and skipped."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True
    return False


def _closed_by(server: SagittaServer, reason: str) -> float:
    """`sagitta_http_connections_closed_total{reason=...}` from /metrics."""
    closed = _series(server, "sagitta_http_connections_closed_total")
    assert f'reason="{reason}"' in closed, closed
    return closed[f'reason="{reason}"']


def test_grpc_connections_have_the_rest_listeners_timeouts(tmp_path: Path) -> None:
    """A gRPC connection that sends nothing is closed after header_read_timeout_secs, an
    idle one after keep_alive_timeout_secs (with GOAWAY: qdrant-client's next call opens a
    new connection and succeeds)."""
    flags = ("--header-read-timeout-secs", "1", "--keep-alive-timeout-secs", "1")
    with running_server(tmp_path / "data", *flags) as server:
        assert server.grpc_port is not None
        silent = socket.create_connection(("127.0.0.1", server.grpc_port))
        assert _closed_within(silent, 6), "a silent gRPC connection stayed open"
        silent.close()
        assert _closed_by(server, "header_timeout") >= 1
        client = grpc_client(server, None)
        client.create_collection(
            "idle",
            vectors_config=models.VectorParams(size=4, distance=models.Distance.DOT),
        )
        points = [
            models.PointStruct(id=i, vector=[float(i), 1, 0, 0]) for i in range(1, 9)
        ]
        client.upsert("idle", points, wait=True)
        idle_before = _closed_by(server, "idle_timeout")
        for _ in range(2):
            # longer than the keep-alive timeout: the connection is closed between calls
            time.sleep(2.5)
            hits = client.query_points("idle", query=[1.0, 0, 0, 0], limit=1).points
            assert [hit.id for hit in hits] == [8]
        assert _closed_by(server, "idle_timeout") >= idle_before + 2
        client.close()


def test_grpc_and_rest_connections_share_the_caps(tmp_path: Path) -> None:
    """With max_connections_per_ip 3, three silent REST connections fill the address's
    share; a gRPC call is admitted by evicting the stalest of them (the caps count both
    listeners' connections in one table), and a REST request after it too."""
    flags = ("--max-connections-per-ip", "3", "--header-read-timeout-secs", "60")
    with running_server(tmp_path / "data", *flags) as server:
        assert server.grpc_port is not None and server.url is not None
        port = int(server.url.rsplit(":", 1)[1])
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        time.sleep(0.3)
        # no REST call of its own (the version check), so only gRPC connects
        client = QdrantClient(
            url=server.url,
            grpc_port=server.grpc_port,
            prefer_grpc=True,
            check_compatibility=False,
            timeout=30,
        )
        assert client.get_collections().collections == []
        closed = [_closed_within(s, 0.7) for s in silent]
        assert closed.count(True) == 1, closed
        # the gRPC connection is idle now, and evictable in turn: REST still gets in
        assert _closed_by(server, "evicted") >= 1
        client.close()
        for s in silent:
            s.close()


def test_collection_info_says_over_grpc_what_it_says_over_rest(tmp_path: Path) -> None:
    """qdrant-client reads the same collection info over both APIs: the optimizer settings
    a client set (vector-db-benchmark's `qdrant` engine reads `max_optimization_threads`
    back over gRPC to decide whether to re-enable indexing), the quantization, the rest of
    the config. gRPC cannot tell an empty `metadata` map or `warnings` list from none."""
    with running_server(tmp_path / "data") as server:
        rest = QdrantClient(url=server.url, timeout=30)
        over_grpc = grpc_client(server, None)
        rest.create_collection(
            "info",
            vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE),
            optimizers_config=models.OptimizersConfigDiff(
                max_optimization_threads=0, memmap_threshold=10_000_000
            ),
        )
        for threads in (0, 100_000):
            over_rest, by_grpc = (
                rest.get_collection("info"),
                over_grpc.get_collection("info"),
            )
            assert by_grpc.config.optimizer_config.max_optimization_threads == threads
            assert by_grpc.config.quantization_config is not None
            assert (
                by_grpc.config.model_copy(update={"metadata": None}) == over_rest.config
            )
            assert by_grpc.model_copy(update={"config": None, "warnings": []}) == (
                over_rest.model_copy(update={"config": None})
            )
            over_grpc.update_collection(
                "info",
                optimizers_config=models.OptimizersConfigDiff(
                    max_optimization_threads=100_000
                ),
            )


def _metrics_text(server: SagittaServer) -> str:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as reply:
        return reply.read().decode()


def _series(server: SagittaServer, name: str) -> dict[str, float]:
    """Every sample of metric `name` in /metrics, by its label text."""
    text = _metrics_text(server)
    pattern = rf"^{name}\{{(.*)\}} (\S+)$"
    return {
        m.group(1): float(m.group(2)) for m in re.finditer(pattern, text, re.MULTILINE)
    }


def test_grpc_calls_are_counted_by_method_and_code(tmp_path: Path) -> None:
    """/metrics counts gRPC calls by method and status code, with a latency histogram;
    a method not served is counted as "other", so clients cannot multiply the series."""
    with running_server(tmp_path / "data") as server:
        client = grpc_client(server, None)
        client.create_collection(
            "m",
            vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT),
        )
        client.upsert("m", [models.PointStruct(id=1, vector=[1.0, 0.0])], wait=True)
        for _ in range(3):
            client.query_points("m", query=[1.0, 0.0], limit=1)
        refused(
            lambda: client.query_points("missing", query=[1.0, 0.0], limit=1),
            grpc.StatusCode.NOT_FOUND,
        )
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            unknown = channel.unary_unary("/qdrant.Points/NoSuchCall")
            refused(lambda: unknown(b""), grpc.StatusCode.UNIMPLEMENTED)
        calls = _series(server, "sagitta_grpc_requests_total")
        assert calls['method="/qdrant.Points/Query",code="Ok"'] == 3
        assert calls['method="/qdrant.Points/Query",code="NotFound"'] == 1
        assert calls['method="/qdrant.Points/Upsert",code="Ok"'] == 1
        assert calls['method="other",code="Unimplemented"'] == 1
        assert not any("NoSuchCall" in labels for labels in calls)
        counts = _series(server, "sagitta_grpc_request_duration_seconds_count")
        assert counts['method="/qdrant.Points/Query"'] == 4
        # each call is also answered (and counted) by its REST route
        http = _series(server, "sagitta_http_requests_total")
        query_route = (
            'method="POST",route="/collections/{name}/points/query",status="200"'
        )
        assert http[query_route] == 3
        client.close()


def _h2_link(
    server: SagittaServer,
) -> tuple[socket.socket, h2.connection.H2Connection, list[tuple[str, str]]]:
    """An HTTP/2 connection to the gRPC port driven frame by frame, and the headers of a
    `Collections/List` call (whose request has no fields: any message of unknown fields
    is a valid one, of any size)."""
    assert server.grpc_port is not None
    sock = socket.create_connection(("127.0.0.1", server.grpc_port))
    link = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    link.initiate_connection()
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/qdrant.Collections/List"),
        (":authority", f"127.0.0.1:{server.grpc_port}"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    return sock, link, headers


def _padded_list_request(size: int) -> bytes:
    """A gRPC frame of a ListCollectionsRequest `size` bytes long: one unknown
    length-delimited field (number 15) that protobuf readers skip."""
    pad = size - 4  # tag byte and a 3-byte varint length
    assert 1 << 14 <= pad < 1 << 21
    varint = bytes([pad & 0x7F | 0x80, (pad >> 7) & 0x7F | 0x80, pad >> 14])
    message = bytes([15 << 3 | 2]) + varint + b"p" * pad
    return b"\x00" + len(message).to_bytes(4, "big") + message


def _send(
    link: h2.connection.H2Connection, stream: int, data: bytes, end_stream: bool = False
) -> None:
    """`data` on `stream` in frames of HTTP/2's default largest size."""
    for at in range(0, len(data), 16_384):
        last = at + 16_384 >= len(data)
        link.send_data(stream, data[at : at + 16_384], end_stream=end_stream and last)


def _grpc_status(
    sock: socket.socket, link: h2.connection.H2Connection, stream: int, trickle: bytes
) -> tuple[str, str, dict[str, str]]:
    """Sends `trickle` one byte every 0.2 s on `stream` while reading the server's frames,
    until the stream ends; returns its grpc-status, its grpc-message and every field of its
    headers and trailers."""
    fields: dict[str, str] = {}
    deadline = time.monotonic() + 30
    sent = 0
    while time.monotonic() < deadline:
        if sent < len(trickle):
            link.send_data(stream, trickle[sent : sent + 1])
            sent += 1
        sock.sendall(link.data_to_send())
        sock.settimeout(0.2)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        assert data, "the server closed the connection instead of answering"
        for event in link.receive_data(data):
            answer = (h2.events.ResponseReceived, h2.events.TrailersReceived)
            if isinstance(event, answer) and event.stream_id == stream:
                for name, value in event.headers or []:
                    fields[bytes(name).decode()] = bytes(value).decode()
            if isinstance(event, h2.events.DataReceived):
                link.acknowledge_received_data(
                    event.flow_controlled_length, event.stream_id
                )
            if isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                sock.sendall(link.data_to_send())
                message = urllib.parse.unquote(fields.get("grpc-message", ""))
                return fields.get("grpc-status", ""), message, fields

        sock.sendall(link.data_to_send())
    raise AssertionError(f"stream {stream} had no answer in 30 s; {fields}")


def test_a_grpc_message_that_trickles_in_is_cut_off_as_a_rest_body_is(
    tmp_path: Path,
) -> None:
    """A call's message gets what a REST body gets: body_read_timeout_secs plus a second
    per min_body_bytes_per_sec bytes. One trickling in a byte every 0.2 s (5 bytes/s, under
    the 100 asked) is answered DEADLINE_EXCEEDED naming the settings, though bytes keep
    coming; the connection then serves a whole call."""
    flags = ("--body-read-timeout-secs", "1", "--min-body-bytes-per-sec", "100")
    with running_server(tmp_path / "data", *flags) as server:
        sock, link, headers = _h2_link(server)
        link.send_headers(1, headers)
        # a message declared at 1,000 bytes, of which at most 150 come (30 s at 5/s)
        link.send_data(1, b"\x00" + (1_000).to_bytes(4, "big"))
        code, message, _ = _grpc_status(sock, link, 1, b"\x00" * 150)
        assert code == str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0]), (code, message)
        assert "min_body_bytes_per_sec" in message, message
        # an empty ListCollectionsRequest, whole: answered on the same connection
        link.send_headers(3, headers)
        link.send_data(3, b"\x00" * 5, end_stream=True)
        code, message, _ = _grpc_status(sock, link, 3, b"")
        assert code == "0", (code, message)
        sock.close()
        refused = _series(server, "sagitta_http_request_bodies_refused_total")
        assert refused['reason="read_timeout"'] == 1
        calls = _series(server, "sagitta_grpc_requests_total")
        assert calls['method="/qdrant.Collections/List",code="DeadlineExceeded"'] == 1
        assert calls['method="/qdrant.Collections/List",code="Ok"'] == 1


def test_grpc_messages_being_received_count_in_the_rest_bodies_budget(
    tmp_path: Path,
) -> None:
    """max_inflight_request_bytes bounds gRPC messages as they arrive, as it bounds REST
    bodies: while 30,000 bytes of one call's message wait for the rest, a 20,000-byte
    message does not fit a 40,000-byte budget and is answered UNAVAILABLE with REST's 503
    message and retry-after; once the first call is cancelled its bytes are given back
    and the same message is answered."""
    flags = (
        "--max-request-bytes",
        "40000",
        "--max-inflight-request-bytes",
        "40000",
    )
    with running_server(tmp_path / "data", *flags) as server:
        sock, link, headers = _h2_link(server)
        link.send_headers(1, headers)
        _send(link, 1, _padded_list_request(39_000)[:30_000])
        sock.sendall(link.data_to_send())
        deadline = time.monotonic() + 30
        while _gauge(server, "sagitta_http_request_body_bytes_inflight") < 30_000:
            assert time.monotonic() < deadline, "the first message was not received"
            time.sleep(0.05)
        link.send_headers(3, headers)
        _send(link, 3, _padded_list_request(20_000), end_stream=True)
        code, message, fields = _grpc_status(sock, link, 3, b"")
        assert code == str(grpc.StatusCode.UNAVAILABLE.value[0]), (code, message)
        assert "max_inflight_request_bytes" in message, message
        assert fields.get("retry-after") == "1", fields
        link.reset_stream(1)
        sock.sendall(link.data_to_send())
        while _gauge(server, "sagitta_http_request_body_bytes_inflight") > 0:
            assert time.monotonic() < deadline, "the cancelled call kept its bytes"
            time.sleep(0.05)
        link.send_headers(5, headers)
        _send(link, 5, _padded_list_request(20_000), end_stream=True)
        code, message, _ = _grpc_status(sock, link, 5, b"")
        assert code == "0", (code, message)
        sock.close()
        refused = _series(server, "sagitta_http_request_bodies_refused_total")
        assert refused['reason="inflight_bytes"'] == 1


def _gauge(server: SagittaServer, name: str) -> float:
    """An unlabelled sample from /metrics."""
    match = re.search(rf"^{name} (\S+)$", _metrics_text(server), re.MULTILINE)
    assert match, name
    return float(match.group(1))
