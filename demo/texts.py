"""The page's fixed words: the introduction, the lanes' colour legend and the footnote on the one clock."""

HERO = ('<div class="hero"><h1>Spec Arena</h1><p>DSpark and DFlash, two <b>lossless</b> speculative decoders, '
        "race a plain greedy decoder on <b>one shared target model</b>. A small head drafts several tokens, "
        "the target checks them all in one forward pass: the text stays exactly the target's own, only the "
        "speed changes. A fourth lane, <b>prompt lookup</b>, drafts with no head, copying from the prompt and "
        "the text so far (Settings; its copy also rides in the heads' rounds: \"+ lookup branch\").</p></div>")

LEGEND = ('<div class="legend"><span><i class="sw acc"></i>accepted draft tokens (drafted, then '
          'checked by the target)</span><span><i class="sw own"></i>the target\'s own token '
          '(one per round: the bonus or a correction)</span></div>')

FOOT = ('<div class="foot">One clock: the engines share one MLX thread, and the one that has computed '
        "least so far always runs next, so at every moment each lane shows what that engine alone would "
        "have written after the same amount of its own compute (the race clock, in engine seconds; the "
        "wall clock is shared by all of them). The speedup is end to end: tokens per engine second, prefill "
        "included, over the plain lane's; at T = 0, where every lane writes the same tokens, that is the "
        "plain lane's finish time over this lane's, so speedups, finish times and places agree. Lanes "
        "closer than the race's noise band tie and share a place. Accept length = tokens committed per "
        "target forward (the target's own token included, so always ≥ 1).</div>")
