"""The race: greedy, DSpark and DFlash on one loaded target and one clock; the arena that serves it, its
outcome, repeats, sweeps over domains, the story of who wins where, and race files."""
