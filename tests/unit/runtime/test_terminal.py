"""Untrusted names shown on a terminal: every control and direction character visible as an escape."""

from __future__ import annotations

import json
import unicodedata

from kafka_lineage.runtime.terminal import shown

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


def test_alert_and_dead_letter_lines_show_hostile_values_escaped() -> None:
    from datetime import UTC, datetime

    from kafka_lineage.app.formats import format_alert, format_dead_letter

    alert = {"severity": "BREAKING", "dataset": {"namespace": "s3://lake", "name": HOSTILE},
             "job": {"namespace": "jobs", "name": "job\x1b[2Jx"}, "runId": "r-1", "eventTime": "2025-01-01T00:00:00Z",
             "changes": [{"kind": "TYPE_CHANGED", "path": "col\rumn", "oldType": "int", "newType": "string\x07",
                          "severity": "BREAKING"}],
             "impactedJobs": [{"namespace": "jobs", "name": "down\u202estream", "depth": 1}],
             "impactedDatasets": [{"namespace": "s3://lake", "name": "mart\x9b1m"}], "impactTruncated": False}
    letter = {"failedAt": datetime(2025, 1, 1, tzinfo=UTC), "stage": "processor", "errorClass": "invalid-event",
              "sourceTopic": "openlineage.events", "sourcePartition": 0, "sourceOffset": 7, "origin": None,
              "value": b"{}", "errorMessage": f"job name {HOSTILE}\nforged"}
    for text in (format_alert(alert), format_dead_letter(letter)):
        lines = text.split("\n")
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for line in lines for c in line)
    assert "evil\\x1b[31mRED" in format_alert(alert) and "down\\u202estream" in format_alert(alert)
    assert len(format_dead_letter(letter).split("\n")) == 2 and "\\x0aforged" in format_dead_letter(letter)
