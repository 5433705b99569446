"""How the API server prints values inside its messages: Go's %q of a string and %#v of a decoded JSON value."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(s: str) -> str:
    """Go's %q of a string (strconv.Quote): printable characters as they are, the rest escaped."""
    out = []
    for ch in s:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")  # a lone surrogate: Go's decoder would have replaced it
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def go_repr(value: Any) -> str:
    """A decoded JSON value as Go's %#v prints it inside an interface{} (how field errors show a value: a string
    quoted, a number as is, a map as map[string]interface {}{...})."""
    if isinstance(value, Mapping):
        inner = ", ".join(f"{json.dumps(str(k))}:{go_repr(value[k])}" for k in sorted(value, key=str))
        return f"map[string]interface {{}}{{{inner}}}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(map(go_repr, value)) + "}"
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
