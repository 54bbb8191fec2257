"""`mpirun -n 4 sagitta serve --mpi`: rank 0 serves Qdrant's REST API for points spread
over four ranks, and qdrant-client sees what its own local mode (the oracle) holding
every point gives: exact searches (filtered, offset, batched), counts, scrolls, retrieves,
facets, payload changes, deletes by id and by filter, groups and recommendations. Each
rank keeps its points in `DATA_DIR/rank-K`; a stopped rank is named in the error within
the deadline, and a restarted job has every acknowledged write.

Needs a `sagitta` built with `--features mpi` and OpenMPI's `mpirun`: scripts/test.sh
builds it and sets `SAGITTA_MPI_BIN`; without that variable (a machine without MPI) the
module is skipped, and CI never runs without it.
"""

from __future__ import annotations

import os
import random
import re
import signal
import shutil
import time
from pathlib import Path

import httpx
import pytest
from qdrant_client import QdrantClient, models

from oracle_checks import same_hits
from server_process import SagittaServer

MPI_BIN = os.environ.get("SAGITTA_MPI_BIN")
pytestmark = pytest.mark.skipif(
    not MPI_BIN, reason="SAGITTA_MPI_BIN (a sagitta built with --features mpi) not set"
)

RANKS = 4
DIM = 16
POINTS = 1_200
NAME = "spread"
TAGS = ["red", "green", "blue", "amber"]
# the deadline each rank gets before rank 0 names it (a search waits it once per level)
RANK_TIMEOUT_MS = 1_500


def launcher() -> tuple[str, ...]:
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun is missing: apt-get install openmpi-bin"
    return (mpirun, "--oversubscribe", "-n", str(RANKS))


def job(data_dir: Path) -> SagittaServer:
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return SagittaServer(
        data_dir,
        "--mpi",
        "--rank-timeout-ms",
        str(RANK_TIMEOUT_MS),
        binary=Path(MPI_BIN or ""),
        launcher=launcher(),
    )


def payload(n: int) -> dict:
    return {"n": n, "tag": TAGS[n % 4], "text": f"doc {n % 9}", "group": n % 5}


def points(rng: random.Random) -> list[models.PointStruct]:
    return [
        models.PointStruct(
            id=n, vector=[rng.uniform(-1, 1) for _ in range(DIM)], payload=payload(n)
        )
        for n in range(POINTS)
    ]


def both(
    server: QdrantClient, oracle: QdrantClient, call: str, *args: object, **kwargs: object
) -> tuple[object, object]:
    return (
        getattr(server, call)(*args, **kwargs),
        getattr(oracle, call)(*args, **kwargs),
    )


def all_pages(
    client: QdrantClient, flt: models.Filter | None, limit: int
) -> list[tuple[object, dict]]:
    found, offset = [], None
    while True:
        page, offset = client.scroll(
            NAME, scroll_filter=flt, limit=limit, offset=offset, with_payload=True
        )
        found += [(point.id, point.payload) for point in page]
        if offset is None:
            return found


def same_everywhere(server: QdrantClient, oracle: QdrantClient, rng: random.Random) -> None:
    reds = models.Filter(
        must=[models.FieldCondition(key="tag", match=models.MatchValue(value="red"))]
    )
    low = models.Filter(must=[models.FieldCondition(key="n", range=models.Range(lt=300))])
    for flt in (None, reds, low):
        mine, theirs = both(server, oracle, "count", NAME, count_filter=flt, exact=True)
        assert mine.count == theirs.count, flt
        assert all_pages(server, flt, 97) == all_pages(oracle, flt, 97), flt
    exact = models.SearchParams(exact=True)
    for n in range(12):
        query = [rng.uniform(-1, 1) for _ in range(DIM)]
        flt = [None, reds, low][n % 3]
        mine, theirs = both(
            server,
            oracle,
            "query_points",
            NAME,
            query=query,
            limit=8,
            offset=n % 3,
            query_filter=flt,
            search_params=exact,
            with_payload=True,
        )
        same_hits(mine.points, theirs.points)
        assert [p.payload for p in mine.points] == [
            p.payload for p in theirs.points
        ], n
    requests = [
        models.QueryRequest(
            query=[rng.uniform(-1, 1) for _ in range(DIM)],
            limit=5,
            params=exact,
            with_payload=True,
        )
        for _ in range(6)
    ]
    mine, theirs = both(server, oracle, "query_batch_points", NAME, requests=requests)
    for got, expected in zip(mine, theirs, strict=True):
        same_hits(got.points, expected.points)
    ids = [0, 5, 17, 999, 1_150, 5_000]
    mine, theirs = both(server, oracle, "retrieve", NAME, ids=ids, with_vectors=True)
    assert sorted((p.id, p.payload) for p in mine) == sorted(
        (p.id, p.payload) for p in theirs
    )
    for got, expected in zip(
        sorted(mine, key=lambda p: p.id), sorted(theirs, key=lambda p: p.id), strict=True
    ):
        assert got.vector == pytest.approx(expected.vector, abs=1e-5)
    mine, theirs = both(server, oracle, "facet", NAME, key="tag", limit=10, exact=True)
    assert sorted((h.value, h.count) for h in mine.hits) == sorted(
        (h.value, h.count) for h in theirs.hits
    )


def test_a_job_of_four_ranks_answers_as_one_process(tmp_path: Path) -> None:
    rng = random.Random(18)
    data = tmp_path / "data"
    server_job = job(data)
    url = server_job.start(timeout=90)
    oracle = QdrantClient(":memory:")
    try:
        server = QdrantClient(url=url, timeout=60)
        params = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
        for client in (server, oracle):
            client.create_collection(NAME, vectors_config=params)
            client.create_payload_index(NAME, "tag", models.PayloadSchemaType.KEYWORD)
        every = points(rng)
        for start in range(0, POINTS, 400):
            for client in (server, oracle):
                client.upsert(NAME, every[start : start + 400], wait=True)
        # every rank holds some of the points, in its own directory
        for rank in range(RANKS):
            assert (data / f"rank-{rank}" / "collections" / NAME).is_dir(), rank
        info = server.get_collection(NAME)
        assert info.points_count == POINTS
        same_everywhere(server, oracle, rng)

        # writes of every kind, routed to the owners
        for client in (server, oracle):
            client.delete(NAME, points_selector=list(range(0, POINTS, 11)), wait=True)
            client.delete(
                NAME,
                points_selector=models.FilterSelector(
                    filter=models.Filter(
                        must=[
                            models.FieldCondition(key="n", range=models.Range(gte=1_100))
                        ]
                    )
                ),
                wait=True,
            )
            client.set_payload(NAME, {"extra": True}, points=[1, 2, 3], wait=True)
            client.overwrite_payload(NAME, {"tag": "red"}, points=[4, 6], wait=True)
            client.delete_payload(NAME, keys=["text"], points=[7, 8], wait=True)
            client.set_payload(
                NAME,
                {"flagged": 1},
                points=models.Filter(
                    must=[models.FieldCondition(key="group", match=models.MatchValue(value=3))]
                ),
                wait=True,
            )
        same_everywhere(server, oracle, rng)

        # grouped and recommended answers are built on the same reads
        query = [rng.uniform(-1, 1) for _ in range(DIM)]
        mine, theirs = both(
            server,
            oracle,
            "query_points_groups",
            NAME,
            group_by="tag",
            query=query,
            limit=3,
            group_size=2,
            search_params=models.SearchParams(exact=True),
        )
        assert [g.id for g in mine.groups] == [g.id for g in theirs.groups]
        for got, expected in zip(mine.groups, theirs.groups, strict=True):
            same_hits(got.hits, expected.hits)
        mine, theirs = both(
            server,
            oracle,
            "query_points",
            NAME,
            query=models.RecommendQuery(recommend=models.RecommendInput(positive=[5, 9])),
            limit=6,
            search_params=models.SearchParams(exact=True),
        )
        same_hits(mine.points, theirs.points)

        # a hung rank is named within the deadline; back, it answers again
        hung = rank_pid(server_job, 2)
        os.kill(hung, signal.SIGSTOP)
        try:
            started = time.monotonic()
            response = httpx.post(
                f"{url}/collections/{NAME}/points/query",
                json={"query": query, "limit": 3},
                timeout=60,
            )
            waited = time.monotonic() - started
        finally:
            os.kill(hung, signal.SIGCONT)
        assert response.status_code == 503, response.text
        error = response.json()["status"]["error"]
        assert re.search(r"ranks? \[?[0-9, ]*2", error), error
        assert "unavailable" in error, error
        assert waited < 10 * RANK_TIMEOUT_MS / 1_000, waited
        time.sleep(0.5)
        same_everywhere(server, oracle, rng)

        # a restarted job has every acknowledged write
        assert server_job.stop() is not None
        server_job.start(timeout=90)
        server = QdrantClient(url=server_job.url, timeout=60)
        same_everywhere(server, oracle, rng)
        server.delete_collection(NAME)
        assert not server.collection_exists(NAME)
        for rank in range(RANKS):
            # the engine leaves a dropped collection's empty directories, not its files
            left = (data / f"rank-{rank}" / "collections" / NAME).rglob("*")
            assert not [path for path in left if path.is_file()], rank
    finally:
        server_job.stop()


def rank_pid(server_job: SagittaServer, rank: int) -> int:
    """The process of rank `rank` (a child of mpirun, told by OpenMPI's environment)."""
    assert server_job.process is not None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().split()[3]) != server_job.process.pid:
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ:
            return int(entry.name)
    raise AssertionError(f"no process of rank {rank} under mpirun")
