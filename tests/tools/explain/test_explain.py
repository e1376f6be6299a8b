"""``mindwatch explain`` on run folders written from a real flight recorder and analysis
(:mod:`.planted`): the story, its 80 columns, the choice of alert, bad input, Chinese."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mindwatch.cli import main
from mindwatch.common.invocation import mindwatch_command
from mindwatch.forensics import resume_hint
from mindwatch.tools.explain import cells, wrap
from tests.tools.explain.planted import (
    ALERT_STEP,
    BAD_SAMPLE,
    LONG,
    NAN_FIRST,
    NAN_OTHER,
    NAN_STEP,
    ONSET,
    SAMPLES,
    SKIP,
    write_run,
)

ENGLISH = {"LANGUAGE": "en", "COLUMNS": "80"}


def explain(*args: str, env: dict[str, str] = ENGLISH) -> Result:
    return CliRunner().invoke(main, ["explain", *args], env=env)


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def fits(output: str, width: int = 80) -> list[str]:
    lines = output.splitlines()
    too_wide = [line for line in lines if cells(line) > width]
    assert too_wide == [], too_wide
    return lines


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("explain") / "run")


def test_the_story_of_the_first_serious_alert_with_forensics(run: Path) -> None:
    result = explain(str(run))
    assert result.exit_code == 0, result.output
    lines = fits(result.output)
    # the heading (wrapped when the run's path is long), then the brief list: the info
    # alert has no forensics, the chosen one is marked
    at = next(i for i, line in enumerate(lines) if line.startswith("   1  "))
    assert " ".join(lines[:at]) == f"3 alerts in {run}; --alert N explains another:"
    assert lines[at].startswith("   1  [info] loss_plateau at step 200")
    assert lines[at + 1].startswith(">  2  [critical] grad_explosion at step 300, rank 1")
    assert lines[at + 1].endswith("[forensics]")
    assert lines[3].endswith("[forensics]")
    text = " ".join(line.strip() for line in lines)
    assert "Alert 2 of 3: [critical] grad_explosion at step 300, rank 1, batch 4: gradient" in text
    # the planted layer on the planted rank, three steps before the loss departed
    assert f"layer {LONG} on rank 1 moved 3 steps before the loss (from step {ONSET}: z " in text
    assert f"the loss departed at step {ONSET + 3}" in text
    table = lines.index("What moved, first movers first")
    assert lines[table + 1].split() == ["#", "onset", "z", "now/usual", "rank", "series"]
    first = lines[table + 2].split()
    assert first[:2] == ["1", str(ONSET)]
    assert first[-2:] == ["1", LONG]
    assert lines[table + 3].split()[1] == str(ONSET + 3)  # the rest followed three steps later
    assert re.search(r"and \d+ more series in forensics/step-300-grad_explosion\.json", text)
    assert "Ranks analysed: 0, 1." in text
    assert "Rank 0: no layer departed." in text
    assert f"Rank 1: {LONG} first, from step {ONSET}" in text


@pytest.mark.parametrize("planted", ["model.layers.3.feed_forward.w2.weight", "lm_head.weight"])
def test_whichever_layer_was_planted_is_named_first(tmp_path: Path, planted: str) -> None:
    folder = write_run(tmp_path / "run", planted=planted)
    result = explain(str(folder), "--step", str(ALERT_STEP))
    assert result.exit_code == 0, result.output
    text = " ".join(line.strip() for line in fits(result.output))
    assert f"First mover layer {planted} on rank 1 moved 3 steps before the loss" in text


def test_long_parameter_names_wrap_at_their_dots_within_80_columns(tmp_path: Path) -> None:
    prefix = "network.model.transformer.backbone.pipeline_stage_0."
    folder = write_run(tmp_path / "run", prefix=prefix)
    result = explain(str(folder), "--alert", "2")
    assert result.exit_code == 0, result.output
    lines = fits(result.output)
    name = prefix + LONG  # 87 characters: longer than a line
    assert len(name) > 80
    table = lines.index("What moved, first movers first")
    row = lines[table + 2]
    column = row.index("network.")
    assert row.split()[:2] == ["1", str(ONSET)]
    pieces = [row[column:]]
    for line in lines[table + 3 :]:
        if line[:column].strip():  # the next row
            break
        pieces.append(line[column:])
    assert "".join(pieces) == name
    assert all(piece.endswith((".", "_")) for piece in pieces[:-1]), pieces  # at its dots
    # in the sentence too, the name is cut only after a dot
    start = next(i for i, line in enumerate(lines) if line == "First mover")
    sentence = lines[start + 1 : lines.index("", start)]
    assert "".join(s.strip() + ("" if s.endswith(".") else " ") for s in sentence).count(name)


def test_the_nonfinite_alert_names_the_parameter_the_samples_and_the_skip(run: Path) -> None:
    result = explain(str(run), "--alert", "3")
    assert result.exit_code == 0, result.output
    lines = fits(result.output)
    text = " ".join(line.strip() for line in lines)
    assert (
        f"{NAN_FIRST} is the first parameter whose gradient was not finite, in backward "
        f"order, at step {NAN_STEP} (2 of 111 parameters not finite)." in text
    )
    assert f"Then, in backward order: {NAN_OTHER}." in text
    assert (
        f"First mover No layer departed before the gradients turned non-finite at step "
        f"{NAN_STEP}; the first of them in backward order is {NAN_FIRST}." in text
    )
    ids = ", ".join(map(str, SAMPLES))
    assert f"step {NAN_STEP}, rank 1, batch 6; 8 sample ids: {ids}." in text
    assert f"Samples whose inputs were not finite: {BAD_SAMPLE}." in text
    assert "skip.json lists this batch; these lines make a resumed run skip it:" in text
    # code as given: each line whole, or broken only after a comma inside its brackets
    code = lines[lines.index("  Python:") + 1 : lines.index("  MindFormers YAML:")]
    assert code[0].strip() == SKIP["python"][0]
    assert len(code) == 3  # the filter line is 86 columns: broken after its comma
    assert code[1].endswith(",")
    assert code[2].startswith("        ")
    assert code[1].strip() + " " + code[2].strip() == SKIP["python"][1]
    yaml = lines[lines.index("  MindFormers YAML:") + 1 :][:2]
    assert yaml == ["    resume_training: True", f"    data_skip_steps: {NAN_STEP}"]


def test_a_moved_run_folder_gets_skip_lines_for_where_it_is_now(tmp_path: Path) -> None:
    first = write_run(tmp_path / "first")
    lines = (first / "alerts.jsonl").read_text(encoding="utf-8").splitlines()
    # As the pipeline writes it: the skip file's absolute path, at the time of the alert.
    gone = tmp_path / "gone" / "skip.json"
    alerts = [json.loads(line) for line in lines]
    alerts[2]["forensics"]["skip"] = resume_hint(gone, column="sample_id", step=NAN_STEP)
    text = "".join(json.dumps(a) + "\n" for a in alerts)
    (first / "alerts.jsonl").write_text(text, encoding="utf-8")
    result = explain(str(first), "--alert", "3")
    assert result.exit_code == 0, result.output
    text = "".join(line.strip() for line in result.output.splitlines())
    assert str(gone) not in text
    assert f'SkipList.load("{first / "skip.json"}")' in text


def test_an_alert_without_forensics_says_so(run: Path) -> None:
    result = explain(str(run), "--step", "200")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Alert 1 of 3: [info] loss_plateau at step 200")
    assert "This alert has no forensics" in result.output


def test_narrow_terminals_get_narrower_lines(run: Path) -> None:
    result = explain(str(run), env={**ENGLISH, "COLUMNS": "50"})
    assert result.exit_code == 0, result.output
    lines = fits(result.output, 50)
    table = lines.index("What moved, first movers first")
    assert lines[table + 1].split()[-1] == "rank"
    assert lines[table + 2].strip() == "series"
    assert lines[table + 4].strip() == LONG  # the names below their rows' numbers


def test_json_has_the_whole_analysis(run: Path) -> None:
    result = explain(str(run), "--alert", "2", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["number"] == 2
    assert data["alert"]["forensics"]["file"] == "forensics/step-300-grad_explosion.json"
    assert data["analysis"]["heat"]["layers"][0] == LONG
    assert len(data["analysis"]["per_rank"]) == 2


def test_without_the_file_the_summary_on_the_line_is_told(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "run", files=False, ranks=False)
    result = explain(str(folder), "--alert", "2")
    assert result.exit_code == 0, result.output
    lines = fits(result.output)
    text = " ".join(line.strip() for line in lines)
    assert f"layer {LONG} on rank 1 moved 3 steps before the loss" in text
    table = lines.index("What moved, first movers first")
    assert lines[table + 1].split() == ["#", "onset", "z", "now/usual", "series"]
    assert [line.split()[0] for line in lines[table + 2 : table + 7]] == ["1", "2", "3", "4", "5"]
    assert lines[table + 7] == ""  # the summary's five, no "more in" line
    assert "Notes forensics/step-300-grad_explosion.json is missing: showing the summary" in text


def test_a_forensics_file_outside_the_run_is_not_read(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "run")
    secret = tmp_path / "outside.json"
    secret.write_text(json.dumps({"first_mover": {"name": "LEAKED", "lead_steps": 1}}))
    lines = (folder / "alerts.jsonl").read_text().splitlines()
    alert = json.loads(lines[1])
    alert["forensics"]["file"] = "../outside.json"
    lines[1] = json.dumps(alert)
    (folder / "alerts.jsonl").write_text("\n".join(lines) + "\n")
    result = explain(str(folder), "--alert", "2")
    assert result.exit_code == 0, result.output
    assert "LEAKED" not in result.output
    told = " ".join(result.output.split())
    assert "'../outside.json' is not a path inside the run folder: ignored" in told
    # nor through a link inside the run that leads out of it
    (folder / "forensics" / "link.json").symlink_to(secret)
    alert["forensics"]["file"] = "forensics/link.json"
    lines[1] = json.dumps(alert)
    (folder / "alerts.jsonl").write_text("\n".join(lines) + "\n")
    linked = explain(str(folder), "--alert", "2")
    assert "LEAKED" not in linked.output
    assert "'forensics/link.json' is not a path inside" in " ".join(linked.output.split())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--alert", "9"], "there is no alert 9 in '{run}': it has 3 (1-3); `{mindwatch} explain"),
        (["--step", "301"], "no alert at step 301 in '{run}'; alerts are at steps 200, 300, 420"),
        (["--alert", "2", "--step", "300"], "give --alert or --step, not both"),
        (["--alert", "0"], "0 is not in the range x>=1"),
    ],
)
def test_an_alert_that_is_not_there_exits_2_naming_it(
    run: Path, args: list[str], says: str
) -> None:
    result = explain(str(run), *args)
    assert result.exit_code == 2, result.output
    said = says.format(run=run, mindwatch=mindwatch_command())
    assert said in " ".join(result.output.split())


def test_bad_run_folders_exit_2_with_the_fix(run: Path, tmp_path: Path) -> None:
    missing = explain(str(tmp_path / "nope"))
    assert missing.exit_code == 2
    assert f"'{tmp_path / 'nope'}' is not a folder; pass a run folder" in missing.output
    parent = explain(str(run.parent))
    assert parent.exit_code == 2
    assert f"has no alerts.jsonl, but runs below it have: {run}; pass one" in parent.output
    (tmp_path / "empty").mkdir()
    empty = explain(str(tmp_path / "empty"))
    assert empty.exit_code == 2
    assert "is not a run folder (no alerts.jsonl, run.json or event files)" in empty.output


def test_a_run_without_alerts_has_nothing_to_explain(tmp_path: Path) -> None:
    import mindwatch

    with mindwatch.Monitor(tmp_path / "calm", {"print_every": 0}) as mon:
        mon.log_scalars(1, {"train/loss": 1.0})
    result = explain(str(tmp_path / "calm"))
    assert result.exit_code == 0, result.output
    assert result.output == f"'{tmp_path / 'calm'}' has no alerts.\n"


def test_the_story_in_chinese_from_the_locale(run: Path) -> None:
    result = explain(str(run), env={"LANGUAGE": "", "LC_ALL": "zh_CN.UTF-8", "COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = fits(result.output)  # Chinese characters count two columns
    at = next(i for i, line in enumerate(lines) if line.startswith("   1  "))
    heading = squash(f"{run} 中有 3 条告警；--alert N 解释其他告警：")
    assert squash("".join(lines[:at])) == heading  # wrapped when the run's path is long
    text = squash(result.output)  # a line may break between any two Chinese characters
    assert squash(f"rank 1 上的层 {LONG} 比损失早 3 步开始偏离（自第 {ONSET} 步起") in text
    assert "偏离的序列，最先偏离的在前" in lines
    assert squash("已分析的 rank：0, 1。") in text
    assert all(not line.lstrip().startswith(("，", "。", "）", "：")) for line in lines)
    nonfinite = explain(str(run), "--alert", "3", "--lang", "zh", env={"COLUMNS": "80"})
    fits(nonfinite.output)
    text = squash(nonfinite.output)
    assert (
        squash(f"按反向传播顺序，{NAN_FIRST} 是第一个梯度非有限的参数，位于第 {NAN_STEP} 步")
        in text
    )
    assert f"输入非有限的样本：{BAD_SAMPLE}。" in text
    assert "续训时跳过它" in text


def test_wrap_breaks_chinese_between_characters_and_names_at_dots() -> None:
    text = "rank 3 上的层 model.layers.11.attention.wv.weight 比损失早 4 步开始偏离，然后是其他层。"
    for width in (20, 31, 44, 80):
        lines = wrap(text, width)
        assert all(cells(line) <= width for line in lines), (width, lines)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        assert not any(line.startswith(("，", "。")) for line in lines)
    assert wrap("a " + "x" * 30, 10) == ["a", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxxxxxxx"]
    assert wrap("see model.layers.11.attention.wv.weight", 20) == [
        "see model.layers.11.",
        "attention.wv.weight",
    ]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\x00\xff binary", "not UTF-8"),
        (b"[1, 2]", "is not a JSON object"),
        (b'{"heat": {"layers": ["a"], "steps": ["x"], "z": [[1]]}, "movers": 5}', ""),
    ],
)
def test_a_damaged_forensics_file_leaves_the_summary(
    tmp_path: Path, content: bytes, why: str
) -> None:
    folder = write_run(tmp_path / "run")
    (folder / "forensics" / "step-300-grad_explosion.json").write_bytes(content)
    result = explain(str(folder), "--alert", "2")
    assert result.exit_code == 0, result.output
    text = " ".join(fits(result.output))
    assert f"layer {LONG} on rank 1 moved 3 steps before the loss" in " ".join(text.split())
    assert why in text
    out = CliRunner().invoke(main, ["report", str(folder), "--out", str(tmp_path / "o")])
    assert out.exit_code == 0, out.output


def test_a_garbled_summary_is_told_as_far_as_it_goes(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "run", files=False)
    lines = (folder / "alerts.jsonl").read_text().splitlines()
    alert = json.loads(lines[1])
    alert["forensics"] = {
        "file": 5,
        "movers": "x",
        "first_mover": {"name": 7, "lead_steps": "3"},
        "nonfinite": [],
        "batch": {"sample_ids": "abc", "rank": "one"},
        "skip": {"python": "not a list", "yaml": [1, 2]},
        "ranks": 7,
        "loss_onset": "soon",
    }
    third = json.loads(lines[2])
    third["forensics"] = "not an object"
    lines[1:3] = [json.dumps(alert), json.dumps(third)]
    (folder / "alerts.jsonl").write_text("\n".join(lines) + "\n")
    result = explain(str(folder), "--alert", "2")
    assert result.exit_code == 0, result.output
    text = " ".join(fits(result.output))
    assert "Nothing departed from its own recent history" in text
    assert "its sample ids were not recorded" in " ".join(text.split())
    assert "the forensics file '5' is not a path inside the run folder" in " ".join(text.split())
    assert "  1" in result.output  # the yaml lines, as strings
    third_told = explain(str(folder), "--alert", "3")
    assert "This alert has no forensics" in third_told.output
    out = CliRunner().invoke(main, ["report", str(folder), "--out", str(tmp_path / "o")])
    assert out.exit_code == 0, out.output


def test_a_gathered_rank_is_told_by_its_own_movers_and_loss(tmp_path: Path) -> None:
    """Under msrun a gathered rank's analysis is its slot decoded: movers and a loss
    onset, no first mover of its own; the story names its first layer all the same."""
    from mindwatch.tools.explain import Incident, render, story

    slot = {
        "rank": 1,
        "loss_onset": 35,
        "movers": [
            {"name": "loss", "kind": "scalar", "onset": 35, "z": 13.5, "rank": 1},
            {"name": "fc.weight", "kind": "layer", "onset": 35, "z": 16.6, "rank": None},
        ],
    }
    quiet = {"rank": 0, "loss_onset": None, "movers": []}
    alert = {"rule": "spike", "severity": "critical", "metric": "m", "step": 35, "message": "x"}
    incident = Incident(1, alert, {"ranks": [0, 1], "movers": slot["movers"]}, tmp_path)
    incident.read()
    incident.analysis = {"per_rank": [quiet, slot]}
    text = " ".join(" ".join(render(story(incident))).split())
    assert "Rank 0: no layer departed." in text
    assert "Rank 1: fc.weight first, from step 35 (z 16.6); its loss departed at step 35." in text
