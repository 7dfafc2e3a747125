"""Run and Stop around one race: what the page shows from the click until the race ends.

A click disables Run ("Racing…") and arms Stop at once (not queued), so nobody starts a second race
by accident and Stop looks usable exactly when it is; the status line says "Queued" while another
race holds the arena (Gradio's queue position shows next to it). Finish, stop or error give both back."""

from __future__ import annotations

import gradio as gr

RUN_LABEL = "Run race"
RACING_LABEL = "Racing…"
SUBMIT_HINT = "Shift+Enter runs the race; Enter adds a new line."
PRIVATE = dict(api_visibility="private")  # the page's own events stay off the API page: that is demo/api.py's
# On Run (and Replay): bring the race into view, the race bar (the status line, its progress strip and Stop)
# at the top, where it stays (sticky) while the lanes scroll under it, unless it is already in the upper part
# of the screen. At once, not smoothly: the status is on screen from the first moment of the race.
IN_VIEW_JS = """() => {
  const s = document.querySelector('#race-bar') || document.querySelector('#status');
  if (s) { const top = s.getBoundingClientRect().top;
           if (top < 0 || top > window.innerHeight * 0.25) window.scrollBy({top: top - 8, behavior: 'instant'}); }
}"""
# Once per page (launch's js): whenever the status line turns to a state a user has to read (a race
# starting, its result, a refusal with its reason), the race bar is brought on screen in the same frame
# if it is not (the finish unpins it: the full result is too tall to keep pinned on a phone). Updates
# within one state (the clocks ticking) never scroll, so the lanes can be read while the race runs.
PAGE_JS = """() => {
  let last = '';
  const check = () => {
    const s = document.querySelector('#status .status');
    if (!s || s.className === last) return;
    last = s.className;
    if (!/\\b(starting|racing|finished|stopped|said)\\b/.test(last)) return;
    const r = (document.querySelector('#race-bar') || s).getBoundingClientRect();
    if (r.top < 0 || r.top > window.innerHeight - Math.min(r.height, 120))
      window.scrollBy({top: r.top - 8, behavior: 'instant'});
  };
  new MutationObserver(check).observe(document.body, {subtree: true, childList: true, attributes: true,
                                                      attributeFilter: ['class']});
}"""


def armed(busy: bool) -> tuple[str, gr.Button, gr.Button]:
    """Status, Run, Stop right after a click; `busy`: another race holds the arena, so ours is queued."""
    if busy:
        status = ('<div class="status queued"><span class="pulse wait"></span><b>Queued</b>: another race is '
                  "running on this server; yours starts as soon as it ends (Stop cancels it).</div>")
    else:
        status = '<div class="status starting"><span class="pulse"></span>Starting the race…</div>'
    return status, gr.Button(RACING_LABEL, interactive=False), gr.Button(interactive=True)


def released() -> tuple[gr.Button, gr.Button]:
    """Run and Stop once the race is over (finished, stopped, refused or failed)."""
    return gr.Button(RUN_LABEL, interactive=True), gr.Button(interactive=False)
