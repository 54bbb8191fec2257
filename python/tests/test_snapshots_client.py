"""Snapshots through qdrant-client, unchanged: a collection snapshot taken while points,
vectors of several kinds, payload indexes and metadata are in place is listed, and
recovering it undoes the writes made after it — every point back with its payload and
vectors, as retrieved before. Full snapshots are made, listed and deleted.
"""

from __future__ import annotations

import random

import pytest
from oracle_checks import same_vectors
from qdrant_client import QdrantClient, models

NAME = "snapshot-client"


@pytest.fixture()
def client(server):
    remote = QdrantClient(url=server.url, prefer_grpc=False, timeout=30)
    rng = random.Random(9)
    remote.create_collection(
        NAME,
        vectors_config={
            "dense": models.VectorParams(size=4, distance=models.Distance.COSINE)
        },
        sparse_vectors_config={"words": models.SparseVectorParams()},
        metadata={"owner": "tests"},
    )
    points = [
        models.PointStruct(
            id=i,
            vector={
                "dense": [rng.uniform(-1, 1) for _ in range(4)],
                "words": models.SparseVector(
                    indices=[i % 7, 10 + i % 5], values=[1.0, 0.5]
                ),
            },
            payload={"body": f"point number {i}", "n": i},
        )
        for i in range(50)
    ]
    remote.upsert(NAME, points, wait=True)
    remote.create_payload_index(
        NAME,
        "body",
        models.TextIndexParams(
            type=models.TextIndexType.TEXT, tokenizer=models.TokenizerType.WORD
        ),
        wait=True,
    )
    yield remote
    remote.delete_collection(NAME)
    remote.close()


def _all(client: QdrantClient) -> list[models.Record]:
    records, _ = client.scroll(NAME, limit=100, with_payload=True, with_vectors=True)
    return sorted(records, key=lambda record: str(record.id))


def test_a_recovered_snapshot_undoes_later_writes(client: QdrantClient) -> None:
    before = _all(client)
    made = client.create_snapshot(NAME, wait=True)
    assert made is not None and made.size > 0
    assert [s.name for s in client.list_snapshots(NAME)] == [made.name]
    client.delete(
        NAME, points_selector=models.PointIdsList(points=[1, 2, 3]), wait=True
    )
    client.set_payload(NAME, payload={"n": -1}, points=[4], wait=True)
    client.delete_payload_index(NAME, "body", wait=True)
    assert client.count(NAME).count == 47
    assert client.recover_snapshot(NAME, location=made.name, wait=True)
    after = _all(client)
    assert [r.id for r in after] == [r.id for r in before]
    for mine, theirs in zip(after, before, strict=True):
        assert mine.payload == theirs.payload
        same_vectors(mine.vector, theirs.vector)
    info = client.get_collection(NAME)
    assert info.payload_schema["body"].data_type == models.PayloadSchemaType.TEXT
    assert info.config.metadata == {"owner": "tests"}
    # the text index is back: "number" is a token of every body, "numb" is not
    text = models.Filter(
        must=[models.FieldCondition(key="body", match=models.MatchText(text="numb"))]
    )
    assert client.count(NAME, count_filter=text).count == 0
    client.delete_snapshot(NAME, snapshot_name=made.name, wait=True)
    assert client.list_snapshots(NAME) == []


def test_full_snapshots(client: QdrantClient) -> None:
    made = client.create_full_snapshot(wait=True)
    assert made is not None
    assert made.name in [s.name for s in client.list_full_snapshots()]
    client.delete_full_snapshot(made.name, wait=True)
    assert made.name not in [s.name for s in client.list_full_snapshots()]
