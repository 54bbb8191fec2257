"""The web dashboard at `/dashboard`, in a real browser: Debian's chromium, headless,
driven by Selenium through Debian's chromedriver (scripts/setup-browser.sh installs both;
nothing is downloaded). A collection made through the API is listed with its count; the
points browser filters with Qdrant's filter JSON and shows the server's message for a bad
one; the search playground finds the expected top hit; the read-only key disables writes;
the metrics page plots from /metrics.

With SAGITTA_SCREENSHOTS=DIR each page's screenshot is saved there (docs/dashboard holds
the ones the README shows).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient, models
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from server_process import SagittaServer, running_server

RW_KEY = "dashboard-read-write"
RO_KEY = "dashboard-read-only"
NAME = "docs"
DIM = 8
TAGS = ["red", "green", "blue"]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[SagittaServer]:
    flags = ("--api-key", RW_KEY, "--read-only-api-key", RO_KEY)
    with running_server(tmp_path_factory.mktemp("dashboard"), *flags) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    chromium = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.fail(
            "chromium and chromedriver are missing: scripts/setup-browser.sh installs "
            "them (apt-get install chromium chromium-driver)",
            pytrace=False,
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,1000")
    options.add_argument("--disable-dev-shm-usage")
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    yield chrome
    chrome.quit()


def wait(browser: WebDriver, condition, what: str, timeout: float = 15.0):
    return WebDriverWait(browser, timeout).until(
        lambda _: condition(), message=f"waiting for {what}"
    )


def shot(browser: WebDriver, name: str) -> None:
    directory = os.environ.get("SAGITTA_SCREENSHOTS")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(directory) / f"{name}.png"))


def type_into(browser: WebDriver, element_id: str, text: str) -> None:
    field = browser.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(text)


def login(browser: WebDriver, server: SagittaServer, key: str) -> None:
    browser.get(f"{server.url}/dashboard#/")
    type_into(browser, "key", key)
    browser.find_element(By.ID, "login").click()


def rows(browser: WebDriver, table: str) -> list:
    return browser.find_elements(By.CSS_SELECTOR, f"#{table} tr[data-id]")


def test_the_dashboard_in_a_browser(server: SagittaServer, browser: WebDriver) -> None:
    rng = random.Random(19)
    vectors = [[rng.uniform(-1, 1) for _ in range(DIM)] for _ in range(60)]
    client = QdrantClient(url=server.url, api_key=RW_KEY, https=False, timeout=30)
    client.create_collection(
        NAME, vectors_config=models.VectorParams(size=DIM, distance="Cosine")
    )
    client.upsert(
        NAME,
        [
            models.PointStruct(
                id=n, vector=vectors[n], payload={"tag": TAGS[n % 3], "n": n}
            )
            for n in range(60)
        ],
        wait=True,
    )

    # the collection is listed with its count
    login(browser, server, RW_KEY)
    listed = f'#collections tr[data-collection="{NAME}"]'
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, listed), "the list")
    row = browser.find_element(By.CSS_SELECTOR, listed)
    assert row.find_element(By.CLASS_NAME, "points").text == "60"
    assert row.find_element(By.CLASS_NAME, "vectors").text == f"{DIM}-d Cosine"
    assert "read-write" in browser.find_element(By.ID, "access").text
    shot(browser, "collections")

    # the points browser, filtered: exactly the red points
    row.find_element(By.LINK_TEXT, NAME).click()
    wait(browser, lambda: rows(browser, "points"), "the first page of points")
    reds = {"must": [{"key": "tag", "match": {"value": "red"}}]}
    type_into(browser, "filter", json.dumps(reds))
    type_into(browser, "limit", "100")
    browser.find_element(By.ID, "scroll").click()
    expected = sorted(n for n in range(60) if n % 3 == 0)
    wait(browser, lambda: len(rows(browser, "points")) == len(expected), "red points")
    shown = sorted(int(r.get_attribute("data-id")) for r in rows(browser, "points"))
    assert shown == expected

    # the search playground: a point's own vector finds it first
    type_into(browser, "query-vector", json.dumps(vectors[7]))
    browser.find_element(By.ID, "search").click()
    wait(browser, lambda: rows(browser, "hits"), "hits")
    first = rows(browser, "hits")[0]
    assert first.find_element(By.CLASS_NAME, "hit-id").text == "7"
    assert float(first.find_element(By.CLASS_NAME, "hit-score").text) == pytest.approx(
        1.0, abs=1e-3
    )
    shot(browser, "collection")

    # a malformed filter: the server's message, naming the field; and not JSON at all
    type_into(browser, "filter", '{"must": [{"key": "tag", "match": {"valu": "red"}}]}')
    browser.find_element(By.ID, "scroll").click()
    error = browser.find_element(By.ID, "points-error")
    wait(browser, lambda: error.text, "the filter's error")
    assert "match" in error.text, error.text
    assert not rows(browser, "points")
    type_into(browser, "filter", '{"must": [')
    browser.find_element(By.ID, "scroll").click()
    wait(browser, lambda: error.text.startswith("filter: not JSON"), "a JSON error")
    shot(browser, "bad-filter")

    # the read-only key: everything shown, writes disabled
    login(browser, server, RO_KEY)
    wait(
        browser,
        lambda: "read-only" in browser.find_element(By.ID, "access").text,
        "the read-only badge",
    )
    browser.get(f"{server.url}/dashboard#/collection/{NAME}")
    wait(browser, lambda: rows(browser, "points"), "points under the read-only key")
    buttons = browser.find_elements(By.CLASS_NAME, "delete-point")
    assert buttons and all(not b.is_enabled() for b in buttons)
    assert not browser.find_element(By.ID, "drop-collection").is_enabled()
    shot(browser, "read-only")
    assert client.count(NAME).count == 60

    # live metrics from /metrics
    browser.get(f"{server.url}/dashboard#/metrics")
    now = browser.find_element(By.ID, "metrics-now")
    wait(browser, lambda: "searches" in now.text, "the first metrics sample")
    sampled = "return window.sagittaMetrics.samples.length"
    for round in range(1, 4):
        # searches and writes between samples, for the plots to show
        for n in range(20 * round):
            client.query_points(NAME, query=vectors[n % 60], limit=3)
        client.upsert(
            NAME,
            [
                models.PointStruct(id=100 + n, vector=vectors[n])
                for n in range(10 * round)
            ],
        )
        seen = browser.execute_script(sampled)
        wait(
            browser,
            lambda seen=seen: browser.execute_script(sampled) > seen,
            "another sample",
        )
    assert browser.find_element(By.ID, "metrics-error").text == ""
    shot(browser, "metrics")
