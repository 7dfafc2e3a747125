"""The race page around the prompt's prefill and at T > 0, in a real browser: a long prompt shows its
progress and stops within a chunk, a lane stopped before its first token is not called identical, and
at T > 0 the verdicts are computed and the third lane is named for what it does."""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest
from served import set_slider
from test_app import opened, visit, wait_done

LONG = " ".join(f"Paragraph {i}: the committee reviewed the river survey, the bridge inspection and the budget "
                f"for the coming season, and asked for a short summary of each item." for i in range(60))


@contextmanager
def page_of(browser, url: str, failure: str):
    """A desktop-sized page on url, settled (values typed while the page starts are lost)."""
    with opened(browser, failure) as page:
        visit(page, url)
        page.wait_for_selector("#run")
        page.wait_for_load_state("networkidle")
        yield page


def open_settings(page) -> None:
    page.locator("#settings button.label-wrap").click()


@pytest.mark.browser
@pytest.mark.pocket
def test_stop_during_a_long_prefill_answers_within_a_chunk(browser, pocket_app):
    """~1,900 prompt tokens on the pocket model: the page shows the prefill's progress with a moving
    clock, Stop ends it within about a second, and nobody is called identical on 0 tokens."""
    from playwright.sync_api import expect

    with page_of(browser, pocket_app.url, "app-prefill-failure.png") as page:
        page.fill("#prompt textarea", LONG)
        page.click("#run")
        expect(page.locator("#status")).to_contain_text("Reading the prompt", timeout=30_000)
        page.wait_for_function("() => /race clock\\s*[1-9]/.test(document.querySelector('#status').innerText)",
                               timeout=30_000)  # the clock moves while the prompt is read
        expect(page.locator("#text-dflash")).to_contain_text("reading the prompt")
        tic = time.monotonic()
        page.click("#stop")
        wait_done(page, "stopped", timeout=30_000)
        took = time.monotonic() - tic
        assert took < 3.0, f"Stop took {took:.1f} s during the prefill"
        for name in ("dspark", "dflash"):
            expect(page.locator(f"#meters-{name} .verdict")).to_have_text("– not checked")
            expect(page.locator(f"#meters-{name} .verdict.ok")).to_have_count(0)
        expect(page.locator("#table")).to_contain_text("stopped before the first token")


@pytest.mark.browser
def test_sampled_verdicts_are_computed_and_the_third_lane_is_plain_sampling(browser, app):
    """T = 1.5 with top-k 1 is greedy in effect: three identical texts must read identical, not
    'differs by design'; at T = 1 the lanes draw differently and the page says where."""
    from playwright.sync_api import expect

    with page_of(browser, app.url, "app-sampled-failure.png") as page:
        page.fill("#prompt textarea", "Write a haiku about rain.")
        open_settings(page)
        set_slider(page, "max-new-tokens", 24)
        set_slider(page, "temperature", 1.5)
        set_slider(page, "top-k", 1)
        page.click("#run")
        wait_done(page)
        expect(page.locator("#meters-greedy .lane-name")).to_have_text("Plain sampling")
        texts = {n: page.locator(f"#text-{n} .lane-text").inner_text() for n in ("dspark", "dflash", "greedy")}
        assert texts["dspark"] == texts["dflash"] == texts["greedy"]
        for name in ("dspark", "dflash"):
            expect(page.locator(f"#meters-{name} .verdict")).to_contain_text("identical to plain sampling")
        set_slider(page, "top-k", 0)
        page.click("#run")
        wait_done(page)
        verdicts = [page.locator(f"#meters-{n} .verdict").inner_text() for n in ("dspark", "dflash")]
        assert all("plain sampling" in v and "by design" not in v for v in verdicts), verdicts
        expect(page.locator("#table")).to_contain_text("plain sampling")
