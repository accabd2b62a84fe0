"""``slam report merge``'s inputs: shards signed with the shard key (HMAC of the digest) merge, a
forged shard whose digest was recomputed is refused, unsigned shards only with ``--unsigned`` (and
the merged report says so). And a shard holding a number JSON has no form for (``NaN``,
``Infinity``: Python's json reads them, no writer of a report writes them) in one line, exit 2,
nothing written, whether its digest was left as written or recomputed over the edit (that
recomputation itself crashed on the NaN: a traceback)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import report_helpers as synth
from report_helpers import expanded

from pytest_slam.cli import main
from pytest_slam.records import Outcome
from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.jsonreport import load_report, write_json
from pytest_slam.report.seal import Seal, digest_of, sign
from pytest_slam.report.visits import Visits


@pytest.mark.parametrize("number", [float("nan"), float("inf")], ids=["NaN", "Infinity"])
@pytest.mark.parametrize("resealed", [False, True], ids=["digest-as-written", "digest-recomputed"])
def test_a_shard_with_a_nan_latency_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], number: float, resealed: bool
) -> None:
    outcomes = synth.outcomes()
    ran = sorted({o["nodeid"] for o in outcomes})
    shard = tmp_path / "shard.json"
    write_json(shard, aggregate(outcomes, synth.run_info()), outcomes,
               Visits(complete=True, collected=ran, selected=ran))  # fmt: skip
    doc = json.loads(shard.read_text(encoding="utf-8"))
    next(o for o in doc["outcomes"] if o.get("calls"))["calls"][0]["e2e_ms"] = number
    if resealed:  # a forger's digest over the edited values, as Python's json would write them
        import hashlib

        digest = hashlib.sha256(json.dumps(doc["visits"], sort_keys=True).encode())
        for outcome in doc["outcomes"]:
            digest.update(json.dumps(outcome).encode() + b"\n")
        doc["digest"] = "sha256:" + digest.hexdigest()
    shard.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "merged.json"
    assert main(["report", "merge", str(shard), "-o", str(out)]) == 2
    captured = capsys.readouterr()
    word = "NaN" if number != number else "Infinity"
    assert captured.err == (
        f"slam report merge: {shard} is not a pytest-slam JSON report: not valid JSON ({word} "
        "is not a number JSON allows); pass the file written by --slm-report\n"
    )
    assert captured.out == "" and not out.exists()


def _shard(tmp_path: Path, name: str = "shard.json") -> Path:
    """A shard's report as its run writes it (signed when SLAM_SHARD_KEY is set)."""
    outcomes = synth.outcomes()
    ran = sorted({o["nodeid"] for o in outcomes})
    path = tmp_path / name
    write_json(path, aggregate(outcomes, synth.run_info()), outcomes,
               Visits(complete=True, collected=ran, selected=ran))  # fmt: skip
    return path


def _forged(path: Path) -> Path:
    """The shard with every test passed and its digest recomputed: what a less-trusted job can
    hand in, since the digest is a checksum anyone can recompute."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["outcomes"] = [{**o, "outcome": "passed"} for o in doc["outcomes"]]
    doc["digest"] = digest_of(doc["visits"], doc["outcomes"])
    forged = path.with_name("forged.json")
    forged.write_text(json.dumps(doc), encoding="utf-8")
    return forged


def test_a_signed_shard_merges_and_a_forged_re_digested_one_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLAM_SHARD_KEY", "the-ci-secret")
    shard = _shard(tmp_path)
    signed = json.loads(shard.read_text(encoding="utf-8"))["signature"]
    assert signed.startswith("hmac-sha256:") and "the-ci-secret" not in shard.read_text()
    assert main(["report", "merge", str(shard), "-o", str(tmp_path / "ok.json")]) in (0, 1)
    capsys.readouterr()
    forged = _forged(shard)
    out = tmp_path / "merged.json"
    assert main(["report", "merge", str(forged), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"slam report merge: {forged}: its signature does not match the shard ")
    assert err.count("\n") == 1 and not out.exists()
    # --unsigned never lets in a shard whose signature is wrong
    assert main(["report", "merge", str(forged), "--unsigned", "-o", str(out)]) == 2
    assert not out.exists()


def test_a_shard_key_file_verifies_and_another_key_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLAM_SHARD_KEY", "the-ci-secret")
    shard = _shard(tmp_path)
    monkeypatch.delenv("SLAM_SHARD_KEY")
    (tmp_path / "right.key").write_text("the-ci-secret\n", encoding="utf-8")
    (tmp_path / "wrong.key").write_text("another-secret\n", encoding="utf-8")
    out = tmp_path / "merged.json"
    argv = ["report", "merge", str(shard), "-o", str(out), "--key-file"]
    assert main([*argv, str(tmp_path / "right.key")]) in (0, 1) and out.exists()
    out.unlink()
    capsys.readouterr()
    assert main([*argv, str(tmp_path / "wrong.key")]) == 2
    assert "its signature does not match the shard key" in capsys.readouterr().err
    assert main([*argv, str(tmp_path / "no.key")]) == 2
    assert "no.key: cannot read the shard key" in capsys.readouterr().err and not out.exists()


def test_unsigned_shards_merge_only_with_the_flag_and_the_merged_report_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLAM_SHARD_KEY", raising=False)
    shard = _shard(tmp_path)
    assert json.loads(shard.read_text(encoding="utf-8"))["signature"] is None
    out = tmp_path / "merged.json"
    assert main(["report", "merge", str(shard), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{shard} carries no signature (its run had no shard key)" in err and "--unsigned" in err
    assert not out.exists()
    assert main(["report", "merge", str(shard), "--unsigned", "-o", str(out)]) in (0, 1)
    said = capsys.readouterr().out
    note = f"merged with --unsigned: 1 shard(s) not verified by a signature ({shard})"
    assert note in said
    assert any(n.startswith(note) for n in json.loads(out.read_text(encoding="utf-8"))["notes"])


LATER = '{"from_a_later_version":[1,2],"nodeid":'


def _later(shard: Path, which: Callable[[int], bool], name: str = "later.json") -> Path:
    """The shard with the outcome lines ``which`` picks (by place) as a later version writes
    them (a key this one does not know), resealed and signed as a job with the key signs it."""
    doc = json.loads(shard.read_text(encoding="utf-8"))
    seal, lines, place = Seal(doc["visits"]), [], 0
    for line in shard.read_text(encoding="utf-8").splitlines():
        if line.startswith('    {"nodeid":'):
            if which(place):
                line = line.replace('{"nodeid":', LATER, 1)
            seal.add(line.strip().removesuffix(","))
            place += 1
        lines.append(line)
    text = "\n".join(lines).replace(doc["digest"], seal.text())
    text = text.replace(doc["signature"], sign(b"the-ci-secret", seal.text()))
    later = shard.with_name(name)
    later.write_text(text + "\n", encoding="utf-8")
    return later


def test_a_signed_shard_of_this_version_is_written_as_read_any_other_line_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard signed by a job of this version (its schema, its plugin_version) is written as
    read, its lines unchecked: they are the lines this version writes (most of a large merge's
    time was checking so). Its first line is checked still. A shard of another version, or let
    in unsigned, is checked line by line: a line this version would write otherwise is written
    anew (here a key it does not know, after the first line)."""
    monkeypatch.setenv("SLAM_SHARD_KEY", "the-ci-secret")
    shard = _shard(tmp_path)
    later = _later(shard, lambda place: place == 1)
    older = later.with_name("older.json")
    older.write_text(
        later.read_text(encoding="utf-8").replace(
            '"plugin_version": "0.1.0"', '"plugin_version": "0.0.9"', 1
        ),
        encoding="utf-8",
    )

    def merged(path: Path, *flags: str) -> str:
        out = tmp_path / f"merged-{path.stem}{len(flags)}.json"
        assert main(["report", "merge", str(path), *flags, "-o", str(out)]) in (0, 1), (
            capsys.readouterr()
        )
        return out.read_text(encoding="utf-8")

    assert merged(later).count(LATER) == 1  # as read
    assert LATER not in merged(older)
    monkeypatch.delenv("SLAM_SHARD_KEY")
    assert LATER not in merged(later, "--unsigned")


def test_an_outcome_without_its_model_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shard = _shard(tmp_path)
    text = shard.read_text(encoding="utf-8")
    doc = json.loads(text)
    first = next(o for o in doc["outcomes"])
    line = json.dumps(first, separators=(",", ":"))
    assert line in text
    del first["model"]
    seal = Seal(doc["visits"])
    for outcome in doc["outcomes"]:
        seal.add(json.dumps(outcome, separators=(",", ":")))
    text = text.replace(line, json.dumps(first, separators=(",", ":"))).replace(
        doc["digest"], seal.text()
    )
    shard.write_text(text, encoding="utf-8")
    out = tmp_path / "merged.json"
    assert main(["report", "merge", str(shard), "--unsigned", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        f"{shard} is not a report as pytest-slam writes it (an outcome without its 'model'" in err
    )
    assert not out.exists()


def test_a_shard_from_another_version_is_merged_as_this_version_writes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge writes a shard's outcome line as read when it is the line it would write itself,
    and writes it anew otherwise: a shard whose outcomes carry a key this pytest-slam does not
    know (a later version's), laid out and signed as a job writes it, merges into the same
    report as the shard without it, the key dropped. And a laid-out line changed in any way,
    a space added, is refused as changed after it was written."""
    monkeypatch.setenv("SLAM_SHARD_KEY", "the-ci-secret")
    shard = _shard(tmp_path)
    later = _later(shard, lambda _: True)  # each line as a later job's
    merged = {}
    for name, path in (("as written", shard), ("later", later)):
        out = tmp_path / f"merged-{name}.json"
        assert main(["report", "merge", str(path), "-o", str(out)]) in (0, 1), capsys.readouterr()
        merged[name] = json.loads(out.read_text(encoding="utf-8"))["outcomes"]
    assert merged["later"] == merged["as written"]
    assert "from_a_later_version" not in json.dumps(merged["later"])

    text = shard.read_text(encoding="utf-8")
    spaced = tmp_path / "spaced.json"
    spaced.write_text(text.replace('{"nodeid":', '{"nodeid": ', 1), encoding="utf-8")
    capsys.readouterr()
    assert main(["report", "merge", str(spaced), "-o", str(tmp_path / "no.json")]) == 2
    assert "was changed after it was written" in capsys.readouterr().err


def test_a_version_1_report_reads_and_merges_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report of schema 1 (every field of every outcome written, ``json``'s spaces, its digest
    over those lines), laid out as its writer wrote it or re-indented by a tool, is read as the
    same outcomes as this version's report of the run and merges into the same report: a
    committed baseline or a shard of the older writer is not refused."""
    monkeypatch.setenv("SLAM_SHARD_KEY", "the-ci-secret")
    shard = _shard(tmp_path)
    doc = json.loads(shard.read_text(encoding="utf-8"))
    full = [Outcome.from_dict(o).as_dict() for o in doc["outcomes"]]
    lines = [json.dumps(o) for o in full]
    head = expanded({**doc, "outcomes": []})  # its visits' selected written, as version 1 did
    seal = Seal(head["visits"])
    for line in lines:
        seal.add(line)
    old = {**head, "schema": "pytest-slam/report/1",
           "outcomes": "OUTCOMES", "digest": seal.text(),
           "signature": sign(b"the-ci-secret", seal.text())}  # fmt: skip
    laid_out = tmp_path / "v1.json"
    outcomes = "[\n    " + ",\n    ".join(lines) + "\n  ]"
    laid_out.write_text(json.dumps(old, indent=2).replace('"OUTCOMES"', outcomes), encoding="utf-8")
    reindented = tmp_path / "v1-reindented.json"
    reindented.write_text(json.dumps({**old, "outcomes": full}, indent=4), encoding="utf-8")
    expected = [o.as_dict() for o in load_report(shard, sealed=True).outcomes]
    merged = {}
    for path in (shard, laid_out, reindented):
        assert [o.as_dict() for o in load_report(path, sealed=True).outcomes] == expected
        out = tmp_path / f"merged-{path.stem}.json"
        assert main(["report", "merge", str(path), "-o", str(out)]) in (0, 1), capsys.readouterr()
        text = out.read_text(encoding="utf-8")
        merged[path.stem] = text[text.index('  "outcomes": [') : text.index('  "digest"')]
        assert json.loads(text)["schema"] == "pytest-slam/report/3"
    assert merged["v1"] == merged["v1-reindented"] == merged["shard"]  # the lines, byte for byte


def test_a_line_of_a_wrong_type_is_refused_as_changed_if_signed_else_by_its_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signed shard of this version is not type-checked line by line (its job wrote each line
    from its record): a line edited to a wrong type is refused by its digest. Resealed and let
    in unsigned, the same line is refused by its type."""
    monkeypatch.setenv("SLAM_SHARD_KEY", "the-ci-secret")
    shard = _shard(tmp_path)
    text = shard.read_text(encoding="utf-8")
    edited = tmp_path / "edited.json"
    edited.write_text(text.replace('{"nodeid":', '{"egress":"x","nodeid":', 1), encoding="utf-8")
    out = tmp_path / "merged.json"
    assert main(["report", "merge", str(edited), "-o", str(out)]) == 2
    assert f"{edited} was changed after it was written" in capsys.readouterr().err

    doc = json.loads(edited.read_text(encoding="utf-8"))
    doc["digest"] = digest_of(doc["visits"], doc["outcomes"])
    edited.write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.delenv("SLAM_SHARD_KEY")
    assert main(["report", "merge", str(edited), "--unsigned", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    why = "outcomes.0.egress: Input should be a valid array"
    assert f"{edited} is not a report as pytest-slam writes it ({why})" in err
    assert not out.exists()


def test_a_signed_shards_visits_edited_to_a_wrong_type_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signed shard of this version's visits (its head's bulk) are checked by its digest, not
    type-checked: edited, the shard is refused in one line, nothing written."""
    monkeypatch.setenv("SLAM_SHARD_KEY", "the-ci-secret")
    shard = _shard(tmp_path)
    text = shard.read_text(encoding="utf-8")
    assert '"complete": true' in text
    shard.write_text(text.replace('"complete": true', '"complete": "yes"', 1), encoding="utf-8")
    out = tmp_path / "merged.json"
    assert main(["report", "merge", str(shard), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"slam report merge: {shard} ") and err.count("\n") == 1, err
    assert not out.exists()


def test_the_visits_leave_out_selected_when_it_is_collected_and_read_it_back(
    tmp_path: Path,
) -> None:
    """``selected`` equal to ``collected`` (a run that deselected nothing) is not written: each
    node id once in the visits, not twice; a reader takes it as ``collected``. A selection that is
    not the whole collection, or none, is written and read back as it was."""
    outcomes = synth.outcomes()
    ran = sorted({o["nodeid"] for o in outcomes})
    verdict = aggregate(outcomes, synth.run_info())
    for selected in (ran, ran[:-1], []):
        path = tmp_path / f"selected-{len(selected)}.json"
        write_json(path, verdict, outcomes, Visits(complete=True, collected=ran, selected=selected))
        written = json.loads(path.read_text(encoding="utf-8"))["visits"]
        assert ("selected" in written) is (selected != ran)
        assert written["collected"] == ran
        visits = load_report(path, sealed=True).visits  # the digest over the visits as written
        assert visits is not None and visits.selected == selected and visits.collected == ran
        assert Visits.from_dict(visits.as_dict()) == visits


def _block(visits: dict[str, object]) -> str:
    """The visits' lines in a report's head, as ``write_json`` writes them."""
    return f'  "visits": {json.dumps(visits, indent=2)},\n'.replace("\n", "\n  ")[:-2]


def _as_version_2(shard: Path) -> Path:
    """The shard as the version-2 writer wrote it: the visits' ``selected`` written although it
    is ``collected``, the digest over those visits, signed as a job with the key signs it."""
    text = shard.read_text(encoding="utf-8")
    doc = json.loads(text)
    visits = doc["visits"]
    assert "selected" not in visits
    start = text.index('  "visits": {\n')
    end = text.index("\n  },\n", start) + len("\n  },\n")
    assert text[start:end] == _block(visits)  # laid out as the head's json.dumps lays it out
    items = list(visits.items())
    at = list(visits).index("collected") + 1
    old = dict([*items[:at], ("selected", visits["collected"]), *items[at:]])
    seal = Seal(old)
    for line in text.splitlines():
        if line.startswith('    {"nodeid":'):
            seal.add(line.strip().removesuffix(","))
    text = text[:start] + _block(old) + text[end:]
    text = text.replace('"schema": "pytest-slam/report/3"', '"schema": "pytest-slam/report/2"', 1)
    text = text.replace(doc["digest"], seal.text()).replace(
        doc["signature"], sign(b"the-ci-secret", seal.text())
    )
    path = shard.with_name("v2.json")
    path.write_text(text, encoding="utf-8")
    return path


def test_a_version_2_report_with_selected_written_reads_and_merges_as_this_versions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report of schema 2 (the visits' ``selected`` written even when it is ``collected``, its
    digest over those visits) loads as the same report as this version's and merges into the same
    outcome lines and visits: a baseline or a shard of the last writer is not refused."""
    monkeypatch.setenv("SLAM_SHARD_KEY", "the-ci-secret")
    shard = _shard(tmp_path)
    v2 = _as_version_2(shard)
    assert '"selected": [' in v2.read_text(encoding="utf-8")
    now, then = load_report(shard, sealed=True), load_report(v2, sealed=True)
    assert then.schema == "pytest-slam/report/2"
    assert then.visits == now.visits and then.visits is not None
    assert then.visits.selected == then.visits.collected != []
    assert then.verdict.as_dict() == now.verdict.as_dict()
    assert [o.as_dict() for o in then.outcomes] == [o.as_dict() for o in now.outcomes]
    merged = {}
    for path in (shard, v2):
        out = tmp_path / f"merged-{path.stem}.json"
        assert main(["report", "merge", str(path), "-o", str(out)]) in (0, 1), capsys.readouterr()
        document = json.loads(out.read_text(encoding="utf-8"))
        assert "selected" not in document["visits"]
        merged[path.stem] = (document["outcomes"], {**document["visits"], "shards": []})
    assert merged["v2"] == merged["shard"]
