"""Pod output made safe to show: what a container writes reaches the simulator's terminal, its JSON report and its
HTML page, and none of them may be steered by it.

`kubectl logs` passes a container's bytes through as they are, and so did the simulator: a pod that printed
`ESC[32msimulation passed ESC[0m` painted a green verdict on the user's terminal, and other escape sequences move
the cursor, rewrite earlier lines (a carriage return alone does), set the window's title or, through OSC 52, the
clipboard. So every C0 control but the tab (U+0000 to U+001F), DEL (U+007F) and every C1 control (U+0080 to U+009F,
which terminals that take 8-bit controls read as ESC sequences: U+009B is CSI) is written as `\\xNN`, its code in
hex, the way Python's repr writes it. Chosen over caret notation (`^[`, as `cat -v` and terminal multiplexers show
controls): that has no single form for C1 controls, and `\\xNN` names the exact code, stays one token to grep for, and
is plain ASCII in JSON and HTML. A tab is kept (logs align columns with it). A backslash is kept as is, so a pod that
prints the four characters `\\x1b` reads the same as one that printed ESC: harmless, since neither reaches the
terminal as a control.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _code(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def printable(text: str) -> str:
    """`text` with every control character but the tab written as `\\xNN` (see the module's docstring)."""
    return _CONTROLS.sub(_code, text)
