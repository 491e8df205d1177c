"""The validation stamp: what it is a digest of, and which headers carry it."""

from __future__ import annotations

import shutil
from pathlib import Path

from kafka_lineage.schemas import validation_stamp
from kafka_lineage.schemas.validation_stamp import HEADER, STAMP, is_stamped, rules_digest


def test_the_stamp_changes_with_any_rule_and_with_the_openlineage_model(tmp_path: Path) -> None:
    here = Path(validation_stamp.__file__).parent
    rules = tmp_path / "schemas"
    shutil.copytree(here, rules, ignore=shutil.ignore_patterns("__pycache__"))
    assert rules_digest(rules) == STAMP  # the installed rules, copied: the same stamp
    assert rules_digest(rules, "0.0.1") != STAMP
    for changed in ("limits.py", "spec.py", "facets/PartitionDatasetFacet.json"):
        copy = tmp_path / changed.replace("/", "-")
        shutil.copytree(here, copy, ignore=shutil.ignore_patterns("__pycache__"))
        (copy / changed).write_text((copy / changed).read_text() + "\n")
        assert rules_digest(copy) != STAMP, changed


def test_only_this_processes_stamp_under_the_header_counts() -> None:
    assert is_stamped([(HEADER, STAMP)]) and is_stamped([("other", b"x"), (HEADER, STAMP)])
    assert is_stamped({HEADER: STAMP})
    assert not is_stamped(None) and not is_stamped([]) and not is_stamped({})
    assert not is_stamped([(HEADER, b"v1:other-rules")]) and not is_stamped([("validated", STAMP)])
    assert not is_stamped([(HEADER, None)])
