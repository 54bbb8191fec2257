"""Prints crates/sagitta-server/proto/qdrant.proto: the part of Qdrant's gRPC contract
SagittaDB serves (the RPCs in SERVED and every message and enum they reach), read from the
descriptors qdrant-client ships, so the field numbers are those its stubs put on the wire.

    .venv/bin/python scripts/grpc_contract.py > crates/sagitta-server/proto/qdrant.proto
"""

from google.protobuf import descriptor_pb2
from qdrant_client.grpc import (
    collections_pb2,
    collections_service_pb2,
    json_with_int_pb2,
    points_pb2,
    points_service_pb2,
    qdrant_common_pb2,
    qdrant_pb2,
    snapshots_service_pb2,
)

SERVED = {
    "Qdrant": ["HealthCheck"],
    "Collections": [
        "Get",
        "List",
        "Create",
        "Update",
        "Delete",
        "UpdateAliases",
        "ListCollectionAliases",
        "ListAliases",
        "CollectionExists",
    ],
    "Points": [
        "Upsert",
        "Delete",
        "Get",
        "UpdateVectors",
        "DeleteVectors",
        "SetPayload",
        "OverwritePayload",
        "DeletePayload",
        "ClearPayload",
        "CreateFieldIndex",
        "DeleteFieldIndex",
        "Search",
        "SearchBatch",
        "SearchGroups",
        "Scroll",
        "Recommend",
        "RecommendBatch",
        "RecommendGroups",
        "Discover",
        "DiscoverBatch",
        "Count",
        "UpdateBatch",
        "Query",
        "QueryBatch",
        "QueryGroups",
        "Facet",
        "SearchMatrixPairs",
        "SearchMatrixOffsets",
    ],
    "Snapshots": ["Create", "List", "Delete", "CreateFull", "ListFull", "DeleteFull"],
}
T = {
    1: "double",
    2: "float",
    3: "int64",
    4: "uint64",
    5: "int32",
    8: "bool",
    9: "string",
    12: "bytes",
    13: "uint32",
    17: "sint32",
    18: "sint64",
    6: "fixed64",
    7: "fixed32",
}
msgs = {}
enums = {}
services = {}


def walk(prefix, m):
    full = prefix + "." + m.name
    msgs[full] = m
    for n in m.nested_type:
        walk(full, n)
    for e in m.enum_type:
        enums[full + "." + e.name] = e


for mod in [
    qdrant_common_pb2,
    json_with_int_pb2,
    collections_pb2,
    points_pb2,
    snapshots_service_pb2,
    qdrant_pb2,
    collections_service_pb2,
    points_service_pb2,
]:
    fd = descriptor_pb2.FileDescriptorProto()
    mod.DESCRIPTOR.CopyToProto(fd)
    for m in fd.message_type:
        walk(".qdrant", m)
    for e in fd.enum_type:
        enums[".qdrant." + e.name] = e
    for s in fd.service:
        services[s.name] = s
need = set()
needenum = set()


def reach(t):
    if t in enums:
        needenum.add(t)
        return
    if t not in msgs or t in need:
        return
    need.add(t)
    for f in msgs[t].field:
        if f.type_name:
            reach(f.type_name)
    for n in msgs[t].nested_type:
        if n.options.map_entry:
            for f in n.field:
                if f.type_name:
                    reach(f.type_name)


for s, rpcs in SERVED.items():
    for mm in services[s].method:
        if mm.name in rpcs:
            reach(mm.input_type)
            reach(mm.output_type)


def tname(f, scope):
    if f.type_name:
        t = f.type_name
        if t.startswith(".google"):
            return t.lstrip(".")
        return t[len(".qdrant.") :]
    return T[f.type]


out = []


def emit_enum(e, ind):
    out.append(f"{ind}enum {e.name} {{")
    for v in e.value:
        out.append(f"{ind}  {v.name} = {v.number};")
    out.append(f"{ind}}}")


def emit(full, m, ind=""):
    out.append(f"{ind}message {m.name} {{")
    for e in m.enum_type:
        emit_enum(e, ind + "  ")
    maps = {}
    for n in m.nested_type:
        if n.options.map_entry:
            maps[n.name] = n
            continue
        emit(full + "." + n.name, n, ind + "  ")
    done = set()
    for f in m.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            i = f.oneof_index
            if i in done:
                continue
            done.add(i)
            out.append(f"{ind}  oneof {m.oneof_decl[i].name} {{")
            for g in m.field:
                if (
                    g.HasField("oneof_index")
                    and g.oneof_index == i
                    and not g.proto3_optional
                ):
                    out.append(f"{ind}    {tname(g, full)} {g.name} = {g.number};")
            out.append(f"{ind}  }}")
            continue
        short = f.type_name.split(".")[-1]
        if f.label == 3 and short in maps:
            k, v = maps[short].field
            out.append(
                f"{ind}  map<{tname(k, full)}, {tname(v, full)}> {f.name} = {f.number};"
            )
            continue
        lab = (
            "repeated " if f.label == 3 else ("optional " if f.proto3_optional else "")
        )
        out.append(f"{ind}  {lab}{tname(f, full)} {f.name} = {f.number};")
    out.append(f"{ind}}}")


top = [t for t in sorted(need) if t.count(".") == 2]
# nested messages reached come with their parent
for t in sorted(need):
    if t.count(".") > 2:
        parent = ".".join(t.split(".")[:3])
        if parent not in need:
            top.append(parent)
            need.add(parent)
for t in sorted(needenum):
    if t.count(".") == 2:
        emit_enum(enums[t], "")
    else:
        parent = ".".join(t.split(".")[:3])
        if parent not in top:
            top.append(parent)
for t in sorted(set(top)):
    emit(t, msgs[t])
for s, rpcs in SERVED.items():
    out.append(f"service {s} {{")
    for mm in services[s].method:
        if mm.name in rpcs:
            request = mm.input_type[len(".qdrant.") :]
            response = mm.output_type[len(".qdrant.") :]
            out.append(f"  rpc {mm.name}({request}) returns ({response});")
    out.append("}")
HEADER = """\
// Qdrant's gRPC contract, as far as SagittaDB serves it: package `qdrant`, the services
// Qdrant (health check), Collections, Points and Snapshots, and every message their served
// RPCs reach, with Qdrant's message names, field names, field numbers and types, so
// qdrant-client (prefer_grpc=True), vector-db-benchmark and VectorDBBench talk to
// SagittaDB unchanged. RPCs not listed here (cluster setup, shard keys, vector names) are
// answered UNIMPLEMENTED by the server.
//
// Printed by scripts/grpc_contract.py from the descriptors qdrant-client ships (the wire
// contract its stubs encode) and checked against them by python/tests/test_grpc.py;
// print it again with that script when the client moves on.
syntax = "proto3";
package qdrant;

import "google/protobuf/timestamp.proto";
"""
print(HEADER)
print("\n".join(out))
