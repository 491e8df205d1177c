"""Untrusted names shown on a terminal: every control and direction character visible as an escape."""

from __future__ import annotations

import json
import unicodedata

from kafka_lineage.terminal import shown

HOSTILE = "evil\x1b[31mRED\x1b[0m\x1b]0;pwned\x07\rSPOOF"


def test_the_issues_hostile_names_lose_every_control_character() -> None:
    assert shown(HOSTILE) == "evil\\x1b[31mRED\\x1b[0m\\x1b]0;pwned\\x07\\x0dSPOOF"
    assert shown("job\x1b[2Jx") == "job\\x1b[2Jx"
    assert shown("a\nforged line\tb") == "a\\x0aforged line\\x09b"


def test_no_control_format_or_separator_character_survives() -> None:
    for code in range(0x110000):
        char = chr(code)
        if unicodedata.category(char) in ("Cc", "Zl", "Zp") or code in (0x202E, 0x202D, 0x2066, 0x200F, 0xFEFF):
            assert char not in shown(f"x{char}y"), hex(code)


def test_ordinary_text_is_left_as_it_is() -> None:
    for text in ("s3://lake/orders", "Ünïcødé 数据 表", "name with spaces", "back\\slash", "emoji 🚀"):
        assert shown(text) == text
    assert shown(42) == "42"


def test_json_output_needs_no_escaping_of_its_own() -> None:
    # the CLI's --json paths print json.dumps, which already writes every control character as an escape
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in json.dumps({"name": HOSTILE + "\u202e"}))
