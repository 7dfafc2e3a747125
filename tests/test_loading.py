"""Loading, downloads, the API and what the app lets and tells visitors (issue 19), on the real app.

Browser tests drive `python -m demo` (offline: HF_HUB_OFFLINE=1) in Debian's Chromium, as test_app."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from served import App
from test_app import PROMPT, opened, visit


def tiny_args(tiny_dir: Path) -> list[str]:
    return ["--target", str(tiny_dir / "qwen3"), "--dspark", str(tiny_dir / "dspark-qwen3"),
            "--dflash", str(tiny_dir / "dflash-qwen3")]


@pytest.fixture(scope="module")
def not_a_head(tiny_dir) -> Path:
    """A folder that exists but holds no model."""
    out = tiny_dir / "not-a-head"
    out.mkdir(exist_ok=True)
    (out / "notes.txt").write_text("not a model\n")
    return out


def open_settings(page, url: str) -> None:
    visit(page, url)
    page.wait_for_selector("#run")
    page.locator("#settings button.label-wrap").click()


def pick(page, preset: str) -> None:
    from demo.stage import preset_choices

    page.locator("#preset input").click()
    label = next(lbl for lbl, value in preset_choices() if value == preset)
    page.get_by_role("option", name=label, exact=True).click()


def toasts(page) -> int:
    return page.locator("[data-testid=toast-body]").count()


# -- loading ------------------------------------------------------------------------------------

@pytest.mark.browser
def test_browser_a_custom_head_that_is_not_a_model_is_named(app, browser, tiny_dir, not_a_head):
    from playwright.sync_api import expect

    with opened(browser, "page-head-error-failure.png") as page:
        open_settings(page, app.url)
        page.locator("#dspark textarea, #dspark input").first.fill("")
        page.locator("#dflash textarea, #dflash input").first.fill(str(not_a_head))
        page.click("#load")
        box = page.locator("#load-errors .error-box")  # next to Load, inside Settings
        # 4 s alone; once, under clean-clone CI load, no box with this text within 150 s: wait for any box,
        # then say what it holds (a wrong message) or what the page showed instead (a load that never ended)
        try:
            expect(box).to_be_visible(timeout=150_000)
        except AssertionError as e:
            raise AssertionError(f"no error box; header: {page.locator('#header').inner_text()!r}") from e
        text = box.inner_text()
        assert "DFlash head" in text, text
        assert "not-a-head" in text and "no config.json" in text and "not a model" in text, text
        assert not text.startswith("Error. could not load qwen3"), text  # not blamed on the target
        assert toasts(page) == 0


@pytest.mark.browser
def test_browser_a_hub_preset_asks_before_downloading(app, browser):
    from playwright.sync_api import expect

    with opened(browser, "page-confirm-failure.png") as page:
        open_settings(page, app.url)
        header = page.locator("#header").inner_text()
        pick(page, "qwen3")
        ask = page.locator("#confirm-text")
        expect(ask).to_be_visible(timeout=30_000)
        expect(ask).to_contain_text("mlx-community/Qwen3-4B-8bit")
        assert re.search(r"about [0-9.]+ GB", ask.inner_text()), ask.inner_text()
        page.wait_for_timeout(1500)  # nothing starts until confirmed
        assert page.locator("#load-errors .error-box").count() == 0
        assert page.locator("#header").inner_text() == header
        page.click("#confirm-yes")
        box = page.locator("#load-errors .error-box")
        expect(box).to_contain_text("could not load qwen3", timeout=60_000)
        text = box.inner_text()
        assert "not in the local hub cache" in text and "Still serving" in text, text
        assert "LocalEntryNotFoundError" not in text and "\n" not in text.strip(), text
        expect(ask).to_be_hidden()
        assert toasts(page) == 0  # one message per failure: the box, no pile of toasts
        pick(page, "gemma4")  # asked again; Cancel goes back to what is served
        expect(ask).to_be_visible(timeout=30_000)
        page.click("#confirm-no")
        expect(ask).to_be_hidden()
        expect(page.locator("#target")).to_be_visible()  # the served custom set, as it was


@pytest.mark.browser
def test_browser_the_header_says_what_is_loaded_without_paths(app, browser, tiny_dir):
    from playwright.sync_api import expect

    with opened(browser, size=None) as page:
        visit(page, app.url)
        expect(page.locator("#header")).to_contain_text("target: qwen3", timeout=60_000)  # ready, not preparing
        chips = page.locator("#header").inner_text()
        assert "DFlash head: dflash-qwen3" in chips and "target: qwen3" in chips, chips
        assert str(tiny_dir) not in page.locator("#header").inner_html()


# -- served beyond this machine -------------------------------------------------------------------

def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


@pytest.mark.browser
def test_browser_a_shared_server_refuses_switching_unless_allowed(browser, tiny_dir, not_a_head, tmp_path):
    from playwright.sync_api import expect

    shared = App(["--host", "0.0.0.0", *tiny_args(tiny_dir)], tmp_path / "shared.log")
    try:
        with opened(browser, "page-shared-failure.png") as page:
            assert str(tiny_dir) not in fetch(shared.url + "config")  # no server path in the page
            open_settings(page, shared.url)
            expect(page.locator("#switch-off")).to_contain_text("--allow-custom")
            expect(page.locator("#preset input")).to_be_disabled()
            expect(page.locator("#load")).to_be_disabled()
            expect(page.locator("#target")).to_be_hidden()
            # a race's downloads and the API name no server path either
            page.fill("#prompt textarea", PROMPT)
            box = page.locator("#max-new-tokens input[type=number]")
            box.fill("12")
            box.press("Enter")
            page.click("#run")
            page.wait_for_selector("#status .status.finished", timeout=120_000)
            href = page.locator('#files a[href$=".json"]').first.get_attribute("href")
            doc = page.request.get(href if href.startswith("http") else shared.url.rstrip("/") + href).text()
            assert "per_round" in doc and str(tiny_dir) not in doc
            from gradio_client import Client

            out = Client(shared.url, verbose=False).predict(PROMPT, 4, api_name="/race")
            assert out["models"] == {"target": "qwen3", "dspark": "dspark-qwen3", "dflash": "dflash-qwen3"}
    finally:
        shared.close()

    allowed = App(["--host", "0.0.0.0", "--allow-custom", *tiny_args(tiny_dir)], tmp_path / "allowed.log")
    try:
        with opened(browser, "page-allowed-failure.png") as page:
            assert str(tiny_dir) not in fetch(allowed.url + "config")
            open_settings(page, allowed.url)
            expect(page.locator("#preset input")).to_be_enabled()
            pick(page, "custom")
            page.locator("#target textarea, #target input").first.fill(str(tiny_dir / "qwen3"))
            page.locator("#dflash textarea, #dflash input").first.fill(str(not_a_head))
            page.click("#load")
            box = page.locator("#load-errors .error-box")
            expect(box).to_contain_text("DFlash head", timeout=60_000)
            assert "not-a-head" in box.inner_text() and str(tiny_dir) not in box.inner_text(), box.inner_text()
    finally:
        allowed.close()


# -- the download -------------------------------------------------------------------------------

def test_the_json_download_has_rounds_time_versions_and_no_paths(tiny_dir):
    from datetime import datetime, timezone

    from demo.export import save_results
    from demo.knobs import settings_of
    from demo.stage import Choice, Stage
    from demo.view import View
    from spec.race.file import race_record

    stage = Stage()
    stage.load(Choice("custom", str(tiny_dir / "qwen3"), str(tiny_dir / "dspark-qwen3"),
                      str(tiny_dir / "dflash-qwen3")))
    try:
        settings = settings_of({"max_new_tokens": 16, "dspark_max_draft": 0, "dflash_max_draft": 0})
        view = View.for_arena(stage.arena, settings)
        events = list(stage.arena.race(PROMPT, settings))
        for ev in events:
            view.feed(ev)
    finally:
        stage.arena.close()
    when = datetime(2026, 12, 4, 8, 0, 0, 123000, tzinfo=timezone.utc)
    first = save_results(view, race_record(events, PROMPT, stage.names(), when), when)
    second = save_results(view, race_record(events, PROMPT, stage.names()))
    assert {Path(f).name for f in first} == {"spec-arena-20261204-080000-123.csv", "spec-arena-20261204-080000-123.json"}
    assert not {Path(f).name for f in first} & {Path(f).name for f in second}  # unique per race
    text = Path(first[1]).read_text()
    assert str(tiny_dir) not in text
    doc = json.loads(text)
    assert doc["timestamp"] == "2026-12-04T08:00:00+00:00"
    assert set(doc["versions"]) == {"spec-arena", "mlx", "mlx-lm", "gradio"}
    assert doc["models"] == {"target": "qwen3", "dspark": "dspark-qwen3", "dflash": "dflash-qwen3"}
    for name in ("dspark", "dflash", "greedy"):
        lane = doc["per_round"][name]
        result = next(r for r in doc["results"] if r["engine"] == name)
        assert len(lane["accept_lengths"]) == len(lane["draft_lengths"]) == len(lane["round_seconds"]) == result[
            "rounds"] > 0
        assert 1 + sum(lane["accept_lengths"]) == result["tokens"]  # the prefill's first token + the rounds'
        assert all(s > 0 for s in lane["round_seconds"])
    assert any(k > 0 for k in doc["per_round"]["dflash"]["draft_lengths"])


# -- the API ------------------------------------------------------------------------------------

def test_the_race_endpoint_has_a_typed_described_return(app):
    info = json.loads(fetch(app.url + "gradio_api/info"))["named_endpoints"]
    race = info["/race"]
    props = race["returns"][0]["type"]["properties"]
    assert {"headline", "table", "texts", "verdicts", "finish_order", "winner", "settings", "models", "positions",
            "confidence"} <= set(props)
    assert props["verdicts"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert "Run one race to the end" in race["description"]
    stream = info["/race_stream"]["returns"][0]["type"]["properties"]
    assert {"state", "lanes", "result"} <= set(stream)
    for name in ("/replay", "/sweep"):  # typed, not Any
        assert info[name]["returns"][0]["type"].get("properties"), name
    assert {"table", "prompts", "settings", "models", "versions", "timestamp"} <= set(
        info["/sweep"]["returns"][0]["type"]["properties"])


def test_every_api_parameter_is_named_and_described(app):
    from demo.knobs import KNOBS

    info = json.loads(fetch(app.url + "gradio_api/info"))["named_endpoints"]
    for name in ("/race", "/race_stream", "/replay", "/sweep"):
        params = {p["parameter_name"]: p for p in info[name]["parameters"]}
        assert {k.name for k in KNOBS} <= set(params), name  # every setting the page has
        for p in params.values():
            assert p["label"] == p["parameter_name"], p
            assert p["python_type"]["description"] and "provided in" not in p["python_type"]["description"], p
    race = {p["parameter_name"]: p for p in info["/race"]["parameters"]}
    assert race["dspark_max_draft"]["parameter_default"] == race["dflash_max_draft"]["parameter_default"] == "auto"
    assert "auto" in race["dspark_max_draft"]["python_type"]["description"]
    assert race["tree"]["parameter_default"] == "auto" and "tree" in race["tree"]["python_type"]["description"]


def test_load_race_gives_back_the_saved_races_result_and_reads_no_server_path(app, tiny_dir):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    from spec.heads.registry import load_dspark
    from spec.race.file import race_record
    from spec.race.run import run_race
    from spec.race.settings import RaceSettings
    from spec.target import load_target

    t = load_target(str(tiny_dir / "qwen3"))
    events = list(run_race(t, {"dspark": load_dspark(str(tiny_dir / "dspark-qwen3"), t)}, "hi",
                           RaceSettings(max_new_tokens=12, dspark_max_draft=3)))
    text = json.dumps(race_record(events, "hi", {"target": "tiny"}))
    client = Client(app.url, verbose=False)
    out = client.predict(text, api_name="/load_race")
    assert out["headline"] == events[-1].outcome.headline() and out["models"] == {"target": "tiny"}
    assert out["positions"] == events[-1].outcome.positions and out["settings"]["dspark_max_draft"] == 3
    assert out["texts"] == {n: r.text for n, r in events[-1].results.items()}
    for bad, words in (("/etc/passwd", "a race file's text"), ('{"x": 1}', "not a race file")):
        with pytest.raises(AppError, match=words):
            client.predict(bad, api_name="/load_race")


def test_the_api_refuses_more_tokens_than_the_page_allows(app):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    c = Client(app.url, verbose=False)
    for api in ("/race", "/race_stream"):
        with pytest.raises(AppError, match="max_new_tokens must be between 1 and 2048"):
            c.predict(PROMPT, 4096, api_name=api)
    with pytest.raises(AppError, match="max_new_tokens must be between 1 and 2048"):
        c.predict("chat", 1, "", 4096, api_name="/sweep")


def test_the_stream_endpoint_yields_updates_while_the_race_runs(app):
    from gradio_client import Client

    job = Client(app.url, verbose=False).submit(PROMPT, 48, api_name="/race_stream")
    updates = list(job)
    last = job.result(timeout=120)
    live = [u for u in updates if u["state"] == "racing"]
    assert len(live) >= 3 and last["state"] == "finished"
    walls = [u["wall_seconds"] for u in updates]
    assert walls == sorted(walls) and live[0]["wall_seconds"] < last["wall_seconds"]
    tokens = [sum(lane["tokens"] for lane in u["lanes"].values()) for u in updates]
    assert tokens == sorted(tokens) and tokens[0] < tokens[-1]
    assert last["result"]["verdicts"] == {"dspark": "identical to greedy", "dflash": "identical to greedy"}
    assert sorted(row["engine"] for row in last["result"]["table"]) == ["dflash", "dspark", "greedy"]
    assert len({lane["text"] for lane in last["lanes"].values()}) == 1 and last["result"]["headline"]
    assert all(u["result"] is None for u in live)


# -- helpers, without a server ---------------------------------------------------------------------

def test_the_pocket_preset_is_named_not_pathed():
    from demo.stage import Choice, model_names

    info = {"target": "/srv/x/SmolLM2", "dspark": "/srv/x/heads/dspark", "dflash": "/srv/x/heads/dflash"}
    names = model_names(Choice("pocket"), info)
    assert names["dflash"] == names["dspark"] == "pocket (trained here)"
    assert names["target"].startswith("SmolLM2-135M-Instruct") and "/" not in names["target"]
    hub = {"target": "mlx-community/Qwen3-4B-8bit", "dflash": "z-lab/Qwen3-4B-DFlash-b16"}
    assert model_names(Choice("qwen3"), hub) == hub


def test_a_preset_already_in_the_hub_cache_needs_no_question(monkeypatch):
    import demo.download as dl
    from demo.stage import Choice

    assert dl.to_download(Choice("pocket")) == {}  # offline by construction
    assert set(dl.to_download(Choice("qwen3"))) == {"target", "dspark", "dflash"}  # not cached here
    monkeypatch.setattr(dl, "cached", lambda repo: repo != "z-lab/Qwen3-4B-DFlash-b16")
    assert dl.to_download(Choice("qwen3")) == {"dflash": "z-lab/Qwen3-4B-DFlash-b16"}


def test_served_beyond_localhost_is_decided_by_host_and_share():
    from demo.exposure import Exposure

    assert not Exposure.of("127.0.0.1").public and Exposure.of("127.0.0.1").may_switch
    assert Exposure.of("0.0.0.0").public and not Exposure.of("0.0.0.0").may_switch
    assert Exposure.of("127.0.0.1", share=True).public
    assert Exposure.of("0.0.0.0", allow_custom=True).may_switch
    said = Exposure.of("0.0.0.0").scrub("could not load /home/me/models/qwen: /home/me/models/qwen has no config.json")
    assert said == "could not load …/qwen: …/qwen has no config.json"
    assert Exposure.of("::1").scrub("/a/b") == "/a/b"


def test_the_hub_librarys_raw_errors_read_as_one_line():
    from huggingface_hub.errors import LocalEntryNotFoundError

    from demo.view import readable

    raw = LocalEntryNotFoundError("An error happened while trying to locate the files on the Hub.\nGot: ConnectError")
    said = readable(raw)
    assert "LocalEntryNotFoundError" not in said and "\n" not in said and "hub cannot be reached" in said


def test_the_question_tells_the_hubs_size_online_and_the_notes_offline(monkeypatch):
    from types import SimpleNamespace

    import huggingface_hub

    import demo.download as dl
    from demo.stage import Choice

    files = [("model.safetensors", 4_000_000_000), ("config.json", 1_000), ("model.py", 10**9), ("README.md", 5)]
    info = SimpleNamespace(siblings=[SimpleNamespace(rfilename=n, size=b) for n, b in files])
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo, **kw: info)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert dl.repo_bytes("a/b", ("*.json", "*.safetensors")) == 4_000_001_000  # never a .py, no README
    repos = dl.hub_refs(Choice("qwen3"))
    assert "**Loading qwen3 downloads 12.0 GB in all (measured on the hub)**" in dl.download_question(
        Choice("qwen3"), repos)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "about 8 GB (the preset's estimate" in dl.download_question(Choice("qwen3"), repos)
