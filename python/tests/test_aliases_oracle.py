"""Collection aliases through qdrant-client, with its local mode (`QdrantClient(":memory:")`)
as the oracle: random sequences of create, re-point, rename and delete actions, and
collection drops, sent to both; after each step both list the same aliases (all of them,
and each collection's), a request one refuses the other refuses too, and a count through
an alias equals the count of its collection.

Where local mode is laxer than Qdrant's server, the sequences stay off that ground: an
alias is never given a collection's name (the server refuses it, local mode does not
check), and a batch of actions that fails is always a single action (the server applies a
batch all or nothing, local mode up to the failure).
"""

from __future__ import annotations

import random

import pytest
from oracle_checks import REFUSED
from qdrant_client import QdrantClient, models

COLLECTIONS = ["docs", "docs_v2", "chat"]
ALIASES = ["live", "staging", "old"]


def _make(client: QdrantClient, name: str, points: int) -> None:
    client.create_collection(
        name, vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT)
    )
    client.upsert(
        name,
        [models.PointStruct(id=i, vector=[1.0, float(i)]) for i in range(points)],
        wait=True,
    )


def _aliases(
    client: QdrantClient, collection: str | None = None
) -> list[tuple[str, str]]:
    if collection is None:
        found = client.get_aliases().aliases
    else:
        found = client.get_collection_aliases(collection).aliases
    return sorted((a.alias_name, a.collection_name) for a in found)


def _action(
    rng: random.Random,
) -> (
    models.CreateAliasOperation
    | models.DeleteAliasOperation
    | models.RenameAliasOperation
):
    kind = rng.randrange(3)
    if kind == 0:
        return models.CreateAliasOperation(
            create_alias=models.CreateAlias(
                collection_name=rng.choice(COLLECTIONS), alias_name=rng.choice(ALIASES)
            )
        )
    if kind == 1:
        return models.DeleteAliasOperation(
            delete_alias=models.DeleteAlias(alias_name=rng.choice(ALIASES))
        )
    return models.RenameAliasOperation(
        rename_alias=models.RenameAlias(
            old_alias_name=rng.choice(ALIASES), new_alias_name=rng.choice(ALIASES)
        )
    )


def _outcome(client: QdrantClient, actions: list) -> bool:
    try:
        client.update_collection_aliases(change_aliases_operations=actions)
    except (*REFUSED, ValueError, KeyError):  # server 4xx / local mode
        return False
    return True


@pytest.mark.parametrize("seed", range(6))
def test_alias_sequences_match_local_mode(clients, seed):
    remote, local = clients
    rng = random.Random(seed)
    for client in (remote, local):
        for name in COLLECTIONS:
            if client.collection_exists(name):
                client.delete_collection(name)
        for alias, _ in _aliases(client):
            client.update_collection_aliases(
                change_aliases_operations=[
                    models.DeleteAliasOperation(
                        delete_alias=models.DeleteAlias(alias_name=alias)
                    )
                ]
            )
        for points, name in enumerate(COLLECTIONS, start=3):
            _make(client, name, points)
    dropped_once = False
    steps_with_aliases = refusals = 0
    for step in range(30):
        if step == 20 and not dropped_once:
            # a dropped collection takes its aliases with it
            for client in (remote, local):
                client.delete_collection("docs")
                _make(client, "docs", 5)
            dropped_once = True
        actions = [_action(rng)]
        if rng.random() < 0.3:
            actions.append(_action(rng))
        # a batch run on a scratch copy of local mode first: a failing batch is sent
        # as its first action only (see the module docstring)
        if len(actions) > 1:
            probe = QdrantClient(":memory:")
            for name in COLLECTIONS:
                _make(probe, name, 1)
            for alias, target in _aliases(local):
                probe.update_collection_aliases(
                    change_aliases_operations=[
                        models.CreateAliasOperation(
                            create_alias=models.CreateAlias(
                                collection_name=target, alias_name=alias
                            )
                        )
                    ]
                )
            if not _outcome(probe, actions):
                actions = actions[:1]
            probe.close()
        expected = _outcome(local, actions)
        got = _outcome(remote, actions)
        assert got == expected, (
            f"seed {seed} step {step}: {actions}: server {got}, local {expected}"
        )
        assert _aliases(remote) == _aliases(local), f"seed {seed} step {step}"
        steps_with_aliases += bool(_aliases(remote))
        refusals += not expected
        for name in COLLECTIONS:
            assert _aliases(remote, name) == _aliases(local, name), (
                f"seed {seed} {name}"
            )
        for alias, target in _aliases(remote):
            assert (
                remote.count(alias).count
                == remote.count(target).count
                == local.count(alias).count
            )
    assert steps_with_aliases > 10 and refusals > 0, (steps_with_aliases, refusals)
