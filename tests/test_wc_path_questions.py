"""IRN's WorldCup2014 path questions (WC-P, WC-P1, WC-P2: question, answer, gold path, answer
set, facts): read by ``--format worldcup``, detected by ``auto``, and evaluated over the real
WC2014 store. The fixture is four lines of IRN's WC-P2.txt (zmtkeke/IRN, data/WC2014/WC-P2.txt;
the WC-P files are not in ../shared/data), the WC2014 KB that of ../shared/data/pathquestion."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.datasets import detect_format, read_questions
from localkg.errors import DatasetError

WC_P2 = Path(__file__).parent / "fixtures" / "wc_p2_tiny.txt"
FACTS = "Alan_PULIDO#plays_in_club#Tigres_UANL///Tigres_UANL#is_in_country#Mexico"


def test_wc_p_files_are_detected_and_read() -> None:
    assert detect_format(WC_P2) == "worldcup"
    questions = read_questions(WC_P2)
    assert read_questions(WC_P2, "worldcup") == questions and len(questions) == 4
    first, second = questions[:2]
    assert first.text == "where is the football club that Alan_PULIDO plays for ?"
    assert first.answers == [["Mexico"]] and first.topic_entities == ["Alan_PULIDO"] and first.hop == 2
    assert first.meta["relation_path"] == ["plays_in_club", "is_in_country"] and first.qtype == "path"
    assert second.topic_entities == ["Mexico"] and second.answers[0] == ["Tigres_UANL"]
    assert len(second.answers) == 12 and ["Club_America"] in second.answers   # every club of the answer set


def test_one_hop_paths_and_a_malformed_line(tmp_path: Path) -> None:
    one_hop = tmp_path / "WC-P1.txt"
    one_hop.write_text(f"which club does Alan_PULIDO play for ?\tTigres_UANL\tAlan_PULIDO#plays_in_club#Tigres_UANL"
                       f"\tTigres_UANL/\t{FACTS}\n")
    (question,) = read_questions(one_hop)
    assert question.hop == 1 and question.answers == [["Tigres_UANL"]] and question.topic_entities == ["Alan_PULIDO"]
    broken = tmp_path / "WC-P.txt"
    broken.write_text(one_hop.read_text() + "which club ?\tTigres_UANL\tAlan_PULIDO#plays_in_club#Tigres_UANL\n")
    with pytest.raises(DatasetError, match=r"WC-P.txt:2: expected 5 tab-separated fields, found 3"):
        read_questions(broken)


def test_wc_p_questions_are_answered_over_the_wc2014_store(shared: Path, tmp_path: Path) -> None:
    db = tmp_path / "wc2014"
    loaded = CliRunner().invoke(main, ["load", "triples", str(shared / "pathquestion" / "WC2014.txt"), "--db", str(db)])
    assert loaded.exit_code == 0, loaded.output
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["eval", str(WC_P2), "--db", str(db), "--reasoner", "embed-path",
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 4 and summary["topic_entities"] == "gold" and summary["hits@1"] > 0
