import pytest


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Ground-truth cache in a temporary directory, so tests never touch bench/cache/."""
    monkeypatch.setenv("SAGITTA_BENCH_CACHE", str(tmp_path / "cache"))
