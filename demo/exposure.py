"""Who can reach this server, and so what its page and API may do and say.

On 127.0.0.1 the visitor is the operator: everything is allowed and paths are theirs to see. Served
beyond this machine (--host other than loopback, or --share), any visitor could make the server open
folders on its disk or start multi-GB downloads and learn its paths from the answers: switching models
is off unless the operator passes --allow-custom, and every text that leaves the server is scrubbed of
server paths."""

from __future__ import annotations

import re
from dataclasses import dataclass

LOOPBACK = ("127.0.0.1", "localhost", "::1")
REFUSED = ("switching models is off on this shared server: it is served beyond this machine "
           "(start it with --allow-custom to allow it)")
# An absolute or home-relative path of at least two parts; its last part is kept ("…/name").
PATH = re.compile(r"(?<![\w.:/])(?:~|/)[^\s'\"`,;:()<>]*/([^\s'\"`,;:()<>/]+)")


@dataclass(frozen=True)
class Exposure:
    public: bool = False  # reachable from other machines
    allow_custom: bool = False  # the operator lets visitors switch models anyway

    @classmethod
    def of(cls, host: str, share: bool = False, allow_custom: bool = False) -> "Exposure":
        """--host / --share decide it: anything but a loopback address is public."""
        return cls(public=bool(share) or host.strip("[]") not in LOOPBACK, allow_custom=bool(allow_custom))

    @property
    def may_switch(self) -> bool:
        """Whether visitors may load presets (downloads) or folders and hub ids of their own."""
        return not self.public or self.allow_custom

    def scrub(self, text: str) -> str:
        """The text as a visitor may read it: server paths cut to their last part when public."""
        return PATH.sub(lambda m: f"…/{m.group(1)}", text) if self.public else text
