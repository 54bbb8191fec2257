"""Sparse vectors and hybrid search in the Python API (`create_collection(sparse_vectors=)`,
`upsert(sparse=)`, `search_sparse`, `hybrid_search`), embedded and through a server,
against qdrant-client's local mode (`QdrantClient(":memory:")`) holding the same points.

Texts are random words encoded by `rag.sparse` (BM25 term weights, the IDF left to the
database); each document's weights carry a distinct factor so no two sparse scores tie
(fusion ranks by position, and ties may be broken either way). Some points have no sparse
vector. Every sparse search and every fused search (RRF and DBSF, plain and filtered)
must give the oracle's ids and scores, embedded also after a reopen (the sparse vectors
come back from the write-ahead log). Bad input is refused naming the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import sagittadb
from oracle_checks import same_hits
from qdrant_client import QdrantClient, models

from rag.sparse import Sparse, encode_document, encode_query

DIM = 8
POINTS = 240
CANDIDATES = 20
NAME = "hybrid-api"
WORDS = [f"term{i}" for i in range(50)]


def _corpus() -> tuple[np.ndarray, list[Sparse | None], list[dict]]:
    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(POINTS, DIM)).astype(np.float32)
    sparse: list[Sparse | None] = []
    for row in range(POINTS):
        if row % 9 == 4:
            sparse.append(None)
            continue
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(3, 14))))
        encoded = encode_document(text)
        factor = 1.0 + row * 1e-3
        sparse.append(Sparse(encoded.indices, [v * factor for v in encoded.values]))
    payloads = [{"group": row % 3, "row": row} for row in range(POINTS)]
    return vectors, sparse, payloads


def _queries() -> list[tuple[np.ndarray, Sparse]]:
    rng = np.random.default_rng(12)
    return [
        (
            rng.normal(size=DIM).astype(np.float32),
            encode_query(" ".join(rng.choice(WORDS, size=int(rng.integers(1, 5))))),
        )
        for _ in range(12)
    ]


def _fill_oracle(vectors, sparse, payloads) -> QdrantClient:
    oracle = QdrantClient(":memory:")
    oracle.create_collection(
        NAME,
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE),
        sparse_vectors_config={
            "bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)
        },
    )
    points = []
    for row in range(POINTS):
        vector: dict = {"": vectors[row].tolist()}
        if sparse[row] is not None:
            vector["bm25"] = models.SparseVector(
                indices=sparse[row].indices, values=sparse[row].values
            )
        points.append(models.PointStruct(id=row, vector=vector, payload=payloads[row]))
    oracle.upsert(NAME, points)
    return oracle


def _fill(database, how: str = "upsert"):
    vectors, sparse, payloads = _corpus()
    oracle = _fill_oracle(vectors, sparse, payloads)
    if how == "import":
        # all at once, the rows as the encoder's objects (`indices`, `values` attributes)
        collection = database.import_collection(
            NAME,
            range(POINTS),
            vectors,
            payloads,
            sparse_vectors={"bm25": {"modifier": "idf"}},
            sparse={"bm25": sparse},
            progress=False,
        )
        return collection, oracle
    collection = database.create_collection(
        NAME, dim=DIM, sparse_vectors={"bm25": {"modifier": "idf"}}
    )
    # two upserts: the sparse rows as dicts, then as (indices, values) pairs
    half = POINTS // 2
    as_dicts = [None if s is None else s.as_dict() for s in sparse[:half]]
    as_pairs = [None if s is None else (s.indices, s.values) for s in sparse[half:]]
    collection.upsert(
        range(half), vectors[:half], payloads[:half], sparse={"bm25": as_dicts}
    )
    collection.upsert(
        range(half, POINTS), vectors[half:], payloads[half:], sparse={"bm25": as_pairs}
    )
    return collection, oracle


def _scored(hits: list[dict]) -> list[models.ScoredPoint]:
    return [models.ScoredPoint(id=h["id"], version=0, score=h["score"]) for h in hits]


def _fused(oracle, dense, sparse, fusion, query_filter=None):
    lexical = models.SparseVector(indices=sparse.indices, values=sparse.values)
    return oracle.query_points(
        NAME,
        prefetch=[
            models.Prefetch(
                query=dense.tolist(), limit=CANDIDATES, filter=query_filter
            ),
            models.Prefetch(
                query=lexical, using="bm25", limit=CANDIDATES, filter=query_filter
            ),
        ],
        query=models.FusionQuery(fusion=fusion),
        limit=10,
    ).points


def _same_points(collection) -> None:
    """`get`, `scroll` and `search` with vectors give each point's sparse vector back."""
    vectors, sparse, _ = _corpus()
    rows = [0, 4, 13, POINTS - 1]  # row 4 has no sparse vector
    for point in collection.get(rows):
        row = point["id"]
        np.testing.assert_allclose(
            point["vector"], vectors[row] / np.linalg.norm(vectors[row]), rtol=1e-5
        )
        expected = {} if sparse[row] is None else {"bm25": sparse[row].as_dict()}
        assert point["sparse"].keys() == expected.keys(), (row, point["sparse"])
        for name, value in expected.items():
            assert point["sparse"][name]["indices"] == value["indices"]
            np.testing.assert_allclose(
                point["sparse"][name]["values"], value["values"], rtol=1e-6
            )
    page, _ = collection.scroll(limit=3, with_vector=True)
    assert all("sparse" in point for point in page)
    (hit,) = collection.search(vectors[14], limit=1, with_vector=True)
    assert hit["id"] == 14 and hit["sparse"]["bm25"]["indices"] == sparse[14].indices
    assert "sparse" not in collection.search(vectors[13], limit=1)[0]


def _same_as_oracle(collection, oracle: QdrantClient) -> None:
    group = {"must": [{"key": "group", "match": {"value": 1}}]}
    oracle_group = models.Filter(
        must=[models.FieldCondition(key="group", match=models.MatchValue(value=1))]
    )
    for dense, sparse in _queries():
        lexical = models.SparseVector(indices=sparse.indices, values=sparse.values)
        expected = oracle.query_points(NAME, query=lexical, using="bm25", limit=10)
        same_hits(
            _scored(collection.search_sparse("bm25", sparse.as_dict())), expected.points
        )
        for fusion in (models.Fusion.RRF, models.Fusion.DBSF):
            got = collection.hybrid_search(
                dense,
                sparse,
                using="bm25",
                candidates=CANDIDATES,
                fusion=fusion.value,
                exact=True,
            )
            same_hits(_scored(got), _fused(oracle, dense, sparse, fusion))
        got = collection.hybrid_search(
            dense,
            sparse.as_dict(),
            using="bm25",
            candidates=CANDIDATES,
            filter=group,
            exact=True,
        )
        assert all(hit["payload"]["group"] == 1 for hit in got)
        same_hits(
            _scored(got), _fused(oracle, dense, sparse, models.Fusion.RRF, oracle_group)
        )


@pytest.mark.parametrize("how", ["upsert", "import"])
def test_sparse_and_hybrid_search_match_local_mode_embedded(tmp_path, how):
    database = sagittadb.open(tmp_path / "db")
    collection, oracle = _fill(database, how)
    _same_as_oracle(collection, oracle)
    _same_points(collection)
    # a hybrid search finds points by either half: one without a sparse vector is found
    # by its dense vector, the sparse half ranks the matching words
    vectors, _, _ = _corpus()
    top = collection.hybrid_search(
        vectors[4], {"indices": [1], "values": [1.0]}, "bm25"
    )
    assert top[0]["id"] == 4
    del collection, database
    reopened = sagittadb.open(tmp_path / "db").collection(NAME)
    _same_as_oracle(reopened, oracle)


@pytest.mark.parametrize("how", ["upsert", "import"])
def test_sparse_and_hybrid_search_match_local_mode_remote(server, how):
    database = sagittadb.connect(server.url)
    try:
        collection, oracle = _fill(database, how)
        _same_as_oracle(collection, oracle)
        _same_points(collection)
    finally:
        database.drop_collection(NAME)


@pytest.mark.parametrize("where", ["embedded", "remote"])
def test_bad_sparse_input_is_refused_naming_it(where, tmp_path, server):
    database = (
        sagittadb.open(tmp_path / "db")
        if where == "embedded"
        else sagittadb.connect(server.url)
    )
    name = f"bad-sparse-{where}"
    with pytest.raises(sagittadb.InvalidParameterError, match="modifier"):
        database.create_collection(
            name, dim=2, sparse_vectors={"s": {"modifier": "bm"}}
        )
    with pytest.raises(sagittadb.InvalidParameterError, match="sparse_vectors"):
        database.import_collection(
            name,
            [1],
            np.array([[1.0, 0.0]], dtype=np.float32),
            sparse={"s": [([1], [1.0])]},
            progress=False,
        )
    assert name not in database.list_collections()
    collection = database.create_collection(name, dim=2, sparse_vectors={"s": {}})
    try:
        cases = [
            ({"s": [{"indices": [1, 1], "values": [1.0, 2.0]}]}, "given twice"),
            ({"s": [{"indices": [1], "values": [float("nan")]}]}, "finite|NaN|nan"),
            ({"s": [{"indices": [1, 2], "values": [1.0]}]}, "indices|values"),
            ({"s": ["words"]}, r"sparse\["),
            ({"other": [{"indices": [1], "values": [1.0]}]}, "other"),
        ]
        for sparse, reason in cases:
            with pytest.raises(sagittadb.SagittaError, match=reason):
                collection.upsert([1], [[1.0, 0.0]], sparse=sparse)
        assert collection.count() == 0
        with pytest.raises(sagittadb.SagittaError, match="nope"):
            collection.search_sparse("nope", {"indices": [1], "values": [1.0]})
        with pytest.raises(sagittadb.InvalidParameterError, match="fusion"):
            collection.hybrid_search([1.0, 0.0], ([1], [1.0]), "s", fusion="max")
    finally:
        database.drop_collection(name)
