"""The page in a real browser: Playwright drives headless Chromium (Debian's `chromium`
package) against `xpusim web`'s app served on loopback. Skipped, saying why, where no
browser is installed. With XPUSIM_SCREENSHOT=PATH the first test writes the README's
screenshot there."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

from xpusim import api  # noqa: E402
from xpusim.web.app import create_app  # noqa: E402

CHROMIUM = os.environ.get("XPUSIM_CHROMIUM") or shutil.which("chromium")
if CHROMIUM is None:
    pytest.skip("no Chromium to drive: apt-get install chromium (or set XPUSIM_CHROMIUM)",
                allow_module_level=True)  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The app on a free loopback port, in a thread, for this module's tests."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(), log_level="warning", access_log=False)
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if running.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    running.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser, server):
    """A fresh page that may fetch from the server only, failing on a script error."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.outside = []
    page.errors = []

    def route(request_route):
        url = request_route.request.url
        if url.startswith(server) or url.startswith("data:"):
            request_route.continue_()
        else:
            page.outside.append(url)
            request_route.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    assert page.outside == [], "the page must work offline"
    assert page.errors == []
    context.close()


def settled(page) -> None:
    """Waits until the page has drawn its answer (the status line empties)."""
    page.wait_for_function("document.getElementById('status').textContent === ''")


def rows(page) -> list[list[str]]:
    return [[td.inner_text() for td in tr.query_selector_all("td")]
            for tr in page.query_selector_all("#results tbody tr")]  # fmt: skip


def test_the_default_view_compares_the_seed_chips(page, server):
    page.goto(server)
    page.wait_for_selector("#results tbody tr")
    settled(page)
    assert [r[0] for r in rows(page)] == ["mtia-v1", "tpu-v4", "groq-system", "h100-sxm"]
    assert all(r[3] == "yes" for r in rows(page))  # 64 Groq chips hold the int8 7B model
    for chart in ("#breakdown svg", "#memory svg", "#roofline svg"):
        assert page.query_selector(chart) is not None
    peak = page.query_selector("#figures tbody td[title*='datasheet']")
    assert peak is not None and "confidence:" in peak.get_attribute("title")
    assert "TDP" in page.query_selector("#results tbody td[title]").get_attribute("title")
    shot = Path(os.environ.get("XPUSIM_SCREENSHOT") or "/dev/null")
    if shot.name != "null":
        page.set_viewport_size({"width": 1400, "height": 1400})
        page.screenshot(path=str(shot), clip={"x": 0, "y": 0, "width": 1400, "height": 1400})


def test_changing_a_chip_changes_the_table_and_the_url(page, server):
    page.goto(server)
    settled(page)
    page.select_option("select[name=target-1]", "mi300x")
    page.wait_for_function("[...document.querySelectorAll('#results td')]"
                           ".some(td => td.textContent === 'mi300x')")  # fmt: skip
    settled(page)
    assert [r[0] for r in rows(page)] == ["mtia-v1", "mi300x", "groq-system", "h100-sxm"]
    assert "mi300x" in page.url


def test_a_shared_url_reproduces_the_view(page, server):
    page.goto(f"{server}/?m=llama-3-8b&t=h100-sxm,b200&p=fp8&b=8&pr=512&g=64")
    page.wait_for_selector("#results tbody tr")
    settled(page)
    assert page.input_value("#model") == "llama-3-8b"
    assert page.input_value("#batch") == "8" and page.input_value("#precision") == "fp8"
    tpot_ms = api.simulate("llama-3-8b", "b200", batch=8, prompt=512, gen=64,
                           precision="fp8").tpot_s * 1e3  # fmt: skip
    b200 = next(r for r in rows(page) if r[0] == "b200")
    assert f"{float(f'{tpot_ms:.3g}'):g} ms" in b200


def test_bad_input_shows_the_message(page, server):
    page.goto(server)
    settled(page)
    page.fill("#batch", "0")
    page.dispatch_event("#batch", "change")
    page.wait_for_selector("#error:not([hidden])")
    assert "options.batch: Input should be greater than or equal to 1" in page.inner_text("#error")
    page.fill("#batch", "1")
    page.dispatch_event("#batch", "change")
    page.wait_for_selector("#error[hidden]", state="attached")
    page.click("#paste summary")
    page.fill("#config", '{"model_type": "whisper", "hidden_size": 768}')
    page.click("#use-config")
    page.wait_for_function("document.getElementById('error').textContent.includes('whisper')")
    assert "model_type 'whisper' is not supported" in page.inner_text("#error")
    page.fill("#config", "{not json")
    page.click("#use-config")
    assert "the pasted config is not JSON" in page.inner_text("#error")


def test_sweep_serving_and_validation_draw(page, server):
    page.goto(f"{server}/?t=h100-sxm,mi300x&p=fp8&sb=1,8,64&sl=1,8&sr=40&spr=256&sgn=32&v=tpu-v4")
    page.wait_for_selector("#sweep svg circle", timeout=60_000)
    page.wait_for_selector("#serving svg path", timeout=60_000)
    page.wait_for_selector("#validation table", timeout=120_000)
    assert len(page.query_selector_all("#sweep svg circle")) == 6
    assert "tpu-v4: median error" in page.inner_text("#validation")


def test_the_plan_view_draws_its_front_and_goodput_cost(page, server):
    page.goto(f"{server}/?m=llama-3.1-8b&t=h100-sxm,mi300x&pl=16&pc=2&ppr=512&pgn=32&ptt=400"
              "&ptp=25&prq=60")  # fmt: skip
    page.wait_for_selector("#plan svg circle", timeout=120_000)
    text = page.inner_text("#plan")
    assert "per million goodput tokens" in text and "$/M goodput" in text
    assert page.query_selector("#plan svg line[stroke-dasharray]")  # the TPOT objective
