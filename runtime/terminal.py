"""Untrusted text made safe for a terminal or a text log: names come from any job that can emit an event.

Control characters would act on the operator's terminal instead of being read: ESC/CSI/OSC sequences recolour the
screen, set the window title or clear it, ``\\r`` overwrites the line just printed, ``\\n`` forges a line, bidirectional
overrides (U+202E) show a name reversed. ``shown`` writes each of them as a visible escape (``\\x1b``, ``\\u202e``),
leaving every other character as it is; JSON output needs none of this (``json.dumps`` escapes them itself).
"""

from __future__ import annotations

# C0 controls (tab and newline included: both reshape a table or a log line), DEL, C1 controls, the bidirectional
# embeddings, overrides, isolates and marks, the line and paragraph separators and the byte-order mark.
_UNSAFE = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
           *range(0x2066, 0x206A), 0x2028, 0x2029, 0xFEFF]
_ESCAPES = {code: (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}") for code in _UNSAFE}


def shown(text: object) -> str:
    """``text`` (``str()`` of anything else) with every control and direction character written as an escape."""
    return str(text).translate(_ESCAPES)
