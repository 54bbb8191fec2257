"""A LlamaIndex vector store on SagittaDB, for either backend.

>>> from sagittadb.llamaindex import SagittaVectorStore  # doctest: +SKIP
>>> store = SagittaVectorStore(sagittadb.open("./data"), "docs")  # doctest: +SKIP
>>> store = SagittaVectorStore(sagittadb.connect("http://127.0.0.1:6333"), "docs")  # doctest: +SKIP

Needs ``llama-index-core`` (``pip install llama-index-core``). Each node is one point: its
embedding is the vector; its metadata, text and relationships are the payload (LlamaIndex's
own ``node_to_metadata_dict`` layout, so ``doc_id`` / ``ref_doc_id`` are payload keys and
metadata filters apply to the node's metadata keys). Node ids that are UUIDs are the point
ids; other node ids are mapped to a UUID (version 5) and kept in the payload. The
collection is created on the first ``add`` with the embeddings' dimension, with a keyword
payload index on ``doc_id`` so deleting a document does not scan.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Optional, Union, cast

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import (
    # llama-index annotates its parameter as a bare `dict` (unknown key and value types).
    metadata_dict_to_node,  # pyright: ignore[reportUnknownVariableType]
    node_to_metadata_dict,
)

from ._native import (
    Collection,
    CollectionNotFoundError,
    Database,
    InvalidParameterError,
)
from .remote import JsonObject, RemoteCollection, RemoteDatabase

#: Points fetched per page by ``get_nodes``.
SCROLL_PAGE = 1_000
#: Namespace of the UUIDs that stand for node ids that are not UUIDs.
NODE_ID_NAMESPACE = uuid.UUID("5f0b6a3e-3d0c-4bd2-9a53-8f0b1c1d2e3f")

# Either backend (they have the same API). Union, not `|`: evaluated at run time (pydantic
# reads the annotations), and the package supports Python 3.9.
AnyDatabase = Union[Database, RemoteDatabase]
AnyCollection = Union[Collection, RemoteCollection]


def point_id(node_id: str) -> str:
    """The point id of a node: the node id if it is a UUID, else a UUID derived from it."""
    try:
        return str(uuid.UUID(node_id))
    except ValueError:
        return str(uuid.uuid5(NODE_ID_NAMESPACE, node_id))


def _values(value: object) -> list[Any]:
    """The list an IN / NIN / ANY / ALL filter compares with (``MetadataFilter.value`` is
    typed as any of the kinds of value a filter can take)."""
    return list(cast(Iterable[Any], value))


def _condition(item: MetadataFilter | MetadataFilters) -> tuple[str, JsonObject]:
    """One LlamaIndex filter as ``(clause, condition)``: clause ``must`` or ``must_not``."""
    if isinstance(item, MetadataFilters):
        return "must", to_sagitta_filter(item)
    key, value, operator = item.key, item.value, item.operator
    ranges = {
        FilterOperator.GT: "gt",
        FilterOperator.GTE: "gte",
        FilterOperator.LT: "lt",
        FilterOperator.LTE: "lte",
    }
    if operator == FilterOperator.EQ:
        return "must", {"key": key, "match": {"value": value}}
    if operator == FilterOperator.NE:
        return "must_not", {"key": key, "match": {"value": value}}
    if operator in ranges:
        return "must", {"key": key, "range": {ranges[operator]: value}}
    if operator in (FilterOperator.IN, FilterOperator.ANY):
        return "must", {"key": key, "match": {"any": _values(value)}}
    if operator == FilterOperator.NIN:
        return "must_not", {"key": key, "match": {"any": _values(value)}}
    if operator == FilterOperator.ALL:
        return "must", {
            "must": [{"key": key, "match": {"value": v}} for v in _values(value)]
        }
    if operator == FilterOperator.CONTAINS:
        return "must", {"key": key, "match": {"value": value}}
    if operator == FilterOperator.TEXT_MATCH:
        return "must", {"key": key, "match": {"text": value}}
    if operator == FilterOperator.IS_EMPTY:
        return "must", {"is_empty": {"key": key}}
    raise InvalidParameterError(
        f"metadata filter on {key!r}: operator {operator} is not supported"
    )


def to_sagitta_filter(filters: MetadataFilters) -> JsonObject:
    """LlamaIndex ``MetadataFilters`` (nested, and / or / not) as a SagittaDB filter."""
    conditions = [_condition(item) for item in filters.filters]
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.AND:
        out: dict[str, list[JsonObject]] = {}
        for clause, part in conditions:
            out.setdefault(clause, []).append(part)
        return out
    # OR / NOT: every item becomes one condition of its own (a negated one nested).
    wrapped = [
        part if clause == "must" else {"must_not": [part]}
        for clause, part in conditions
    ]
    if condition == FilterCondition.OR:
        return {"should": wrapped}
    if condition == FilterCondition.NOT:
        return {"must_not": wrapped}
    raise InvalidParameterError(f"filter condition {condition} is not supported")


class SagittaVectorStore(BasePydanticVectorStore):
    """LlamaIndex vector store over a SagittaDB collection (embedded or remote)."""

    stores_text: bool = True
    flat_metadata: bool = False
    collection_name: str
    distance: str = "Cosine"

    _database: AnyDatabase = PrivateAttr()
    # Optional, not `| None`: pydantic evaluates the annotation, on Python 3.9 too.
    _collection: Optional[AnyCollection] = PrivateAttr(default=None)  # noqa: UP045

    def __init__(
        self, database: AnyDatabase, collection_name: str, distance: str = "Cosine"
    ) -> None:
        # pydantic's __init__ takes this model's fields; pyright checks the call against
        # the base model's fields instead.
        super().__init__(collection_name=collection_name, distance=distance)  # pyright: ignore[reportCallIssue]
        self._database = database
        try:
            self._collection = database.collection(collection_name)
        except CollectionNotFoundError:
            self._collection = None

    @classmethod
    def class_name(cls) -> str:
        return "SagittaVectorStore"

    @property
    def client(self) -> AnyDatabase:
        """The SagittaDB database (``sagittadb.open`` or ``sagittadb.connect``)."""
        return self._database

    def _ensure_collection(self, dim: int) -> AnyCollection:
        if self._collection is None:
            self._collection = self._database.create_collection(
                self.collection_name, dim=dim, distance=self.distance
            )
            self._collection.create_payload_index("doc_id", "keyword")
        return self._collection

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Upserts the nodes (each must have an embedding); returns their node ids."""
        if not nodes:
            return []
        embeddings: list[list[float]] = []
        for node in nodes:
            embedding = node.get_embedding()  # raises when a node has none
            embeddings.append(embedding)
        collection = self._ensure_collection(len(embeddings[0]))
        payloads: list[JsonObject] = []
        for node in nodes:
            payload = node_to_metadata_dict(
                node, remove_text=False, flat_metadata=self.flat_metadata
            )
            payload["node_id"] = node.node_id
            payloads.append(payload)
        ids = [point_id(node.node_id) for node in nodes]
        collection.upsert(ids, embeddings, payloads, wait=True)
        return [node.node_id for node in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Deletes every node of document ``ref_doc_id``."""
        if self._collection is None:
            return
        self._collection.delete(
            filter={"must": [{"key": "doc_id", "match": {"value": ref_doc_id}}]}
        )

    def _selection(
        self, node_ids: list[str] | None, filters: MetadataFilters | None
    ) -> JsonObject | None:
        must: list[JsonObject] = []
        if node_ids is not None:
            must.append({"has_id": [point_id(node_id) for node_id in node_ids]})
        if filters is not None:
            must.append(to_sagitta_filter(filters))
        return {"must": must} if must else None

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Deletes the nodes named and/or matching ``filters``."""
        selection = self._selection(node_ids, filters)
        if self._collection is not None and selection is not None:
            self._collection.delete(filter=selection)

    def get_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        """The nodes named and/or matching ``filters`` (all nodes when neither is given),
        with their embeddings."""
        if self._collection is None:
            return []
        selection = self._selection(node_ids, filters)
        nodes: list[BaseNode] = []
        offset: int | str | None = None
        while True:
            page, offset = self._collection.scroll(
                limit=SCROLL_PAGE, offset=offset, filter=selection, with_vector=True
            )
            for point in page:
                node = metadata_dict_to_node(point["payload"])
                node.embedding = list(point["vector"])
                nodes.append(node)
            if offset is None:
                return nodes

    def clear(self) -> None:
        """Drops the collection (it is created again by the next ``add``)."""
        if self._collection is not None:
            self._database.drop_collection(self.collection_name)
            self._collection = None

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The ``similarity_top_k`` nodes closest to ``query.query_embedding`` among those
        passing ``query.filters`` (and ``doc_ids`` / ``node_ids`` when given)."""
        if query.mode != VectorStoreQueryMode.DEFAULT:
            raise InvalidParameterError(f"query mode {query.mode} is not supported")
        if query.query_embedding is None:
            raise InvalidParameterError("the query has no embedding")
        if self._collection is None:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        must: list[JsonObject] = []
        if query.filters is not None:
            must.append(to_sagitta_filter(query.filters))
        if query.doc_ids:
            must.append({"key": "doc_id", "match": {"any": list(query.doc_ids)}})
        if query.node_ids:
            must.append({"has_id": [point_id(node_id) for node_id in query.node_ids]})
        hits = self._collection.search(
            query.query_embedding,
            limit=query.similarity_top_k,
            filter={"must": must} if must else None,
        )
        nodes = [metadata_dict_to_node(hit["payload"]) for hit in hits]
        return VectorStoreQueryResult(
            nodes=nodes,
            similarities=[hit["score"] for hit in hits],
            ids=[node.node_id for node in nodes],
        )
