"""A pytest plugin loaded into Qdrant's client test suite by ``bench.compat``: it runs
the REST variants and leaves out the tests that need gRPC, or, with
``SAGITTA_COMPAT_API=grpc``, runs those and leaves out the rest; it says which it left out.

A test needs gRPC when it is parametrized with ``prefer_grpc=True``, when its name says
``grpc`` (conversions to and from gRPC messages, gRPC-only options), or, for a test
without a ``prefer_grpc`` parameter, when it makes or compares with a gRPC client: a
fixture or a variable named ``*grpc_client``, ``prefer_grpc=True`` or ``RpcError`` in its
code (the congruence tests that check REST against gRPC and local mode at once, the client
construction tests). Everything else runs as the suite wrote it.
"""

import inspect
import json
import os

GRPC_MARKS = ("grpc_client", "prefer_grpc=True", "RpcError")


def needs_grpc(name: str, params: dict, source: str = "") -> bool:
    """Whether a collected test talks gRPC (see the module's docstring); ``source`` is the
    test function's code."""
    if "prefer_grpc" in params:
        return params["prefer_grpc"] is True
    if "grpc" in name.split("[")[0].lower():
        return True
    return any(mark in source for mark in GRPC_MARKS)


def _source(item) -> str:
    try:
        return inspect.getsource(item.function)
    except (AttributeError, OSError, TypeError):
        return ""


def pytest_collection_modifyitems(config, items):
    want_grpc = os.environ.get("SAGITTA_COMPAT_API") == "grpc"
    kept, left_out = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = dict(callspec.params) if callspec is not None else {}
        fixtures = " ".join(getattr(item, "fixturenames", ()))
        grpc = needs_grpc(item.name, params, fixtures + "\n" + _source(item))
        (left_out if grpc != want_grpc else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    record = os.environ.get("SAGITTA_COMPAT_DESELECTED")
    if record:
        with open(record, "w", encoding="utf-8") as out:
            json.dump(sorted(item.nodeid for item in left_out), out, indent=0)
