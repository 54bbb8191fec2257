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
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from oracle_checks import same_hits
from qdrant_client import QdrantClient, models
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


def job(data_dir: Path, *mpirun_flags: str) -> SagittaServer:
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    mpirun, *rest = launcher()
    return SagittaServer(
        data_dir,
        "--mpi",
        "--rank-timeout-ms",
        str(RANK_TIMEOUT_MS),
        binary=Path(MPI_BIN or ""),
        launcher=(mpirun, *mpirun_flags, *rest),
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
    server: QdrantClient,
    oracle: QdrantClient,
    call: str,
    *args: object,
    **kwargs: object,
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


def same_everywhere(
    server: QdrantClient, oracle: QdrantClient, rng: random.Random
) -> None:
    reds = models.Filter(
        must=[models.FieldCondition(key="tag", match=models.MatchValue(value="red"))]
    )
    low = models.Filter(
        must=[models.FieldCondition(key="n", range=models.Range(lt=300))]
    )
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
        assert [p.payload for p in mine.points] == [p.payload for p in theirs.points], n
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
        sorted(mine, key=lambda p: p.id),
        sorted(theirs, key=lambda p: p.id),
        strict=True,
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
            client.create_collection(NAME, vectors_config=params, shard_number=2)
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
                            models.FieldCondition(
                                key="n", range=models.Range(gte=1_100)
                            )
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
                    must=[
                        models.FieldCondition(
                            key="group", match=models.MatchValue(value=3)
                        )
                    ]
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
            query=models.RecommendQuery(
                recommend=models.RecommendInput(positive=[5, 9])
            ),
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
        shard_snapshots_undo_later_writes(server, server_job.url, data / "rank-0")
        same_everywhere(server, oracle, rng)
        server.delete_collection(NAME)
        assert not server.collection_exists(NAME)
        for rank in range(RANKS):
            # the engine leaves a dropped collection's empty directories, not its files
            left = (data / f"rank-{rank}" / "collections" / NAME).rglob("*")
            assert not [path for path in left if path.is_file()], rank
    finally:
        server_job.stop()


def shard_snapshots_undo_later_writes(
    server: QdrantClient, url: str, rank_0: Path
) -> None:
    """Takes a snapshot of each shard (shard i of the job: shard i of every rank) over
    REST, changes points on every rank, and recovers each shard from its snapshot."""
    assert server.get_collection(NAME).config.params.shard_number == 2
    taken = []
    for shard in range(2):
        made = httpx.post(
            f"{url}/collections/{NAME}/shards/{shard}/snapshots", timeout=60
        )
        assert made.status_code == 200, made.text
        taken.append(made.json()["result"]["name"])
    rng = random.Random(7)
    server.delete(NAME, points_selector=list(range(1, 400, 3)), wait=True)
    # points the earlier deletes (every 11th id) left
    kept = [n for n in range(500, 560) if n % 11]
    server.set_payload(NAME, {"later": 1}, points=kept, wait=True)
    server.upsert(
        NAME,
        [
            models.PointStruct(id=n, vector=[rng.uniform(-1, 1) for _ in range(DIM)])
            for n in range(5_000, 5_050)
        ],
        wait=True,
    )
    for shard, name in enumerate(taken):
        location = rank_0 / "snapshots" / NAME / "shards" / str(shard) / name
        recovered = httpx.put(
            f"{url}/collections/{NAME}/shards/{shard}/snapshots/recover",
            json={"location": location.as_uri()},
            timeout=60,
        )
        assert recovered.status_code == 200, recovered.text


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


def test_a_dead_rank_is_named_then_skipped_and_a_restart_has_every_write(
    tmp_path: Path,
) -> None:
    """Under `mpirun --enable-recovery` the job outlives a killed rank: rank 0 names it
    within the deadline (queries of 1,024 floats: messages over the 4,000-byte piece, which
    a rendezvous send to a dead rank would never finish), and after three misses answers at
    once; restarted whole, the job has every point acknowledged before the kill."""
    data = tmp_path / "data"
    server_job = job(data, "--enable-recovery")
    url = server_job.start(timeout=90)
    dim = 1_024
    rng = random.Random(4)
    try:
        client = QdrantClient(url=url, timeout=60)
        client.create_collection(
            "wide",
            vectors_config=models.VectorParams(size=dim, distance=models.Distance.DOT),
        )
        wide = [
            models.PointStruct(id=n, vector=[rng.uniform(-1, 1) for _ in range(dim)])
            for n in range(200)
        ]
        client.upsert("wide", wide, wait=True)
        query = [rng.uniform(-1, 1) for _ in range(dim)]
        assert len(client.query_points("wide", query=query, limit=3).points) == 3
        os.kill(rank_pid(server_job, 2), signal.SIGKILL)
        waits = []
        for _ in range(5):
            started = time.monotonic()
            response = httpx.post(
                f"{url}/collections/wide/points/query",
                json={"query": query, "limit": 3},
                timeout=60,
            )
            waits.append(time.monotonic() - started)
            assert response.status_code == 503, response.text
            error = response.json()["status"]["error"]
            assert re.search(r"ranks \[2", error), error
        # a search waits the deadline once per tree level; then the rank is skipped
        assert max(waits) < 3 * RANK_TIMEOUT_MS / 1_000 + 1, waits
        assert waits[-1] < RANK_TIMEOUT_MS / 1_000 / 2, waits
        response = httpx.post(
            f"{url}/collections/wide/points/count", json={}, timeout=60
        )
        assert response.status_code == 503, response.text
        assert "rank 2" in response.json()["status"]["error"], response.text
        survivors = [rank_pid(server_job, rank) for rank in (0, 1, 3)]
    finally:
        server_job.stop()
    # every rank left, rank 3 too, whose tree parent (rank 2) died: none holds its
    # directory's lock against the restart
    for pid in survivors:
        status = Path(f"/proc/{pid}/status")
        assert not status.exists() or "zombie" in status.read_text(), pid
    restarted = job(data)
    url = restarted.start(timeout=90)
    try:
        client = QdrantClient(url=url, timeout=60)
        assert client.count("wide", exact=True).count == 200
        found = client.query_points(
            "wide", query=query, limit=5, search_params=models.SearchParams(exact=True)
        ).points
        best = sorted(
            wide,
            key=lambda p: -sum(a * b for a, b in zip(p.vector, query, strict=True)),
        )
        assert [p.id for p in found] == [p.id for p in best[:5]]
    finally:
        restarted.stop()


def test_a_scattered_import_is_all_or_nothing_and_served_by_the_job(
    tmp_path: Path,
) -> None:
    """`mpirun -n 4 sagitta import --mpi`: every rank imports the points it owns into its
    own directory; when one rank cannot (it has the collection already), the others drop
    theirs again. The job then serves the import as one process holding it would."""
    import numpy as np

    rng = np.random.default_rng(9)
    vectors = rng.uniform(-1, 1, size=(500, DIM)).astype(np.float32)
    np.save(tmp_path / "base.npy", vectors)
    (tmp_path / "payloads.jsonl").write_text(
        "".join(f'{{"n": {n}, "tag": "{TAGS[n % 4]}"}}\n' for n in range(500))
    )
    data = tmp_path / "data"
    environment = {
        **os.environ,
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    }

    def sagitta_import(
        name: str, *launch: str, data_dir: Path = data
    ) -> subprocess.CompletedProcess[str]:
        mpi = ["--mpi"] if launch else []
        return subprocess.run(
            [
                *launch,
                str(MPI_BIN),
                "import",
                "--data",
                str(data_dir),
                "--collection",
                name,
                "--distance",
                "Cosine",
                "--payloads",
                str(tmp_path / "payloads.jsonl"),
                str(tmp_path / "base.npy"),
                *mpi,
            ],
            capture_output=True,
            text=True,
            env=environment,
            timeout=300,
            check=False,
        )

    done = sagitta_import("imported", *launcher())
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in range(RANKS):
        assert f"rank {rank} of {RANKS}: imported" in done.stdout, done.stdout
    # rank 2 has `taken` already: the scattered import of it fails on every rank
    alone = sagitta_import("taken", data_dir=data / "rank-2")
    assert alone.returncode == 0, alone.stdout + alone.stderr
    refused = sagitta_import("taken", *launcher())
    assert refused.returncode != 0
    # whichever rank mpirun hears from first says which rank failed
    assert "the import failed on ranks [2]" in refused.stderr, refused.stderr
    for rank in (0, 1, 3):
        left = (data / f"rank-{rank}" / "collections" / "taken").rglob("*")
        assert not [path for path in left if path.is_file()], rank

    oracle = QdrantClient(":memory:")
    oracle.create_collection(
        "imported",
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE),
    )
    oracle.upsert(
        "imported",
        [
            models.PointStruct(
                id=n, vector=vectors[n].tolist(), payload={"n": n, "tag": TAGS[n % 4]}
            )
            for n in range(500)
        ],
    )
    server_job = job(data)
    url = server_job.start(timeout=90)
    try:
        server = QdrantClient(url=url, timeout=60)
        assert server.count("imported", exact=True).count == 500
        assert server.collection_exists("taken") is False
        exact = models.SearchParams(exact=True)
        for n in range(5):
            query = rng.uniform(-1, 1, size=DIM).tolist()
            mine, theirs = both(
                server,
                oracle,
                "query_points",
                "imported",
                query=query,
                limit=6,
                search_params=exact,
                with_payload=True,
            )
            same_hits(mine.points, theirs.points)
            assert [p.payload for p in mine.points] == [
                p.payload for p in theirs.points
            ], n
    finally:
        server_job.stop()
