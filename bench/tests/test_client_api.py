"""bench.client_api end to end on a small synthetic set: both APIs upload, search, find
the true neighbours, and the document is valid."""

import json

from bench import client_api, report


def test_rest_and_grpc_are_measured_side_by_side(tmp_path):
    out = tmp_path / "api.json"
    code = client_api.main(
        [
            "--dataset", "synth", "--n", "400", "--dim", "16", "--nq", "20",
            "--queries", "40", "--warmup", "4", "--threads", "1,2", "--batch", "64",
            "--workdir", str(tmp_path), "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    document = json.loads(out.read_text())
    assert report.validate(document) == []
    engines = [result["engine"] for result in document["results"]]
    assert engines == ["sagitta-server-rest", "sagitta-server-grpc"]
    for result in document["results"]:
        assert result["upload_points_per_second"] > 0
        assert [run["threads"] for run in result["runs"]] == [1, 2]
        for run in result["runs"]:
            # 400 points stay below the full-scan threshold: exact answers
            assert run["recall_at_k"] > 0.99, (result["engine"], run)
