"""Output folders are replaced as a whole (previous complete results, or the new ones,
never a mix), and `--ray` without Ray names the extra to install."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from aryl import _io
from aryl._io import atomic_directory, replace_directory
from aryl.cli import main
from aryl.errors import ArylError, InvalidInputError

MANIFEST = json.dumps({"command": "aryl experiment paper"})


def old_output(path: Path) -> dict[str, str]:
    path.mkdir()
    files = {"manifest.json": MANIFEST, "a.csv": "old a\n", "only-old.txt": "gone later\n"}
    for name, text in files.items():
        (path / name).write_text(text)
    return files


def contents(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in path.iterdir()}


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_a_folder_is_replaced_as_a_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         exchange: bool) -> None:
    if not exchange:  # the fallback for systems without an atomic exchange
        monkeypatch.setattr(_io, "_exchange", lambda a, b: False)
    out = tmp_path / "out"
    old_output(out)
    with atomic_directory(out) as tmp:
        assert tmp.parent == tmp_path
        assert tmp.name.startswith(".out.")
        (tmp / "manifest.json").write_text(MANIFEST)
        (tmp / "a.csv").write_text("new a\n")
        assert contents(out)["a.csv"] == "old a\n"  # readers still see the old folder
    assert contents(out) == {"manifest.json": MANIFEST, "a.csv": "new a\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging, no old copy


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_write_leaves_the_previous_folder(tmp_path: Path,
                                                         error: type[BaseException]) -> None:
    out = tmp_path / "out"
    before = old_output(out)

    def write(dest: Path) -> None:
        with atomic_directory(dest) as tmp:
            (tmp / "a.csv").write_text("half of the new results\n")
            raise error

    with pytest.raises(error):
        write(out)
    assert contents(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    # and when there was nothing before, there is nothing after
    with pytest.raises(error):
        write(tmp_path / "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_folder_aryl_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    with pytest.raises(InvalidInputError, match="non-empty folder that aryl did not write"), \
            atomic_directory(mine):
        pass
    (mine / "manifest.json").write_text(json.dumps({"command": "make"}))
    with pytest.raises(InvalidInputError, match="aryl did not write"), atomic_directory(mine):
        pass
    assert (mine / "thesis.tex").read_text() == "precious"
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInputError, match="exists and is not a folder"), \
            atomic_directory(tmp_path / "file"):
        pass
    empty = tmp_path / "empty"
    empty.mkdir()
    with atomic_directory(empty) as tmp:
        (tmp / "x.txt").write_text("x")
    assert contents(empty) == {"x.txt": "x"}


def test_the_new_folder_gets_the_mode_mkdir_would_give(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        with atomic_directory(tmp_path / "out") as tmp:
            (tmp / "x").write_text("x")
    finally:
        os.umask(old)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o750


def test_replace_directory_into_a_missing_path(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_text("1")
    replace_directory(tmp_path / "src", tmp_path / "dest")
    assert contents(tmp_path / "dest") == {"f": "1"}
    assert not (tmp_path / "src").exists()


MINI_PAPER = """
[grid]
tags = {section = "headline"}
trace = "itp-c10"
policy = ["fifo", "aryl"]
seed = [0, 1]
n_training_servers = 4
n_inference_servers = 4

[[run]]
tags = {section = "ablation"}
policy = "aryl-no-loan"

[[run]]
tags = {section = "sensitivity", sweep = "rescale_pause_s"}
policy = "aryl"
rescale_pause_s = 0.0
"""


def test_experiment_paper_interrupted_while_writing_keeps_the_old_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aryl.experiment as experiment

    spec = tmp_path / "mini.toml"
    spec.write_text(MINI_PAPER)
    out = tmp_path / "results"
    before = old_output(out)

    def interrupted(*args: object, **kwargs: object) -> list[str]:
        raise KeyboardInterrupt  # Ctrl-C while the figures are drawn

    monkeypatch.setattr(experiment, "_figures", interrupted)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_paper(out, spec=spec, n_procs=1, reclaim_instances=20)
    assert contents(out) == before
    # the replays are kept (the documented exception) and the next call reuses them
    assert sorted(p.name for p in tmp_path.iterdir()) == [".results.sweep", "mini.toml",
                                                          "results"]
    monkeypatch.undo()
    tables = experiment.run_paper(out, spec=spec, n_procs=1, reclaim_instances=20)
    assert set(tables) == {"runs", "headline", "ablations", "sensitivity", "reclaim"}
    assert "only-old.txt" not in {p.name for p in out.iterdir()}
    assert json.loads((out / "manifest.json").read_text())["seeds"] == [0, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mini.toml", "results"]


def test_paper_refuses_an_output_folder_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["experiment", "paper", "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "non-empty folder that aryl did not write" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_ray_missing_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aryl.sweep.backends import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ArylError, match=r"pip install 'aryl\[ray\]'"):
        import_ray()
    spec = tmp_path / "s.toml"
    spec.write_text("[grid]\ntrace = 'itp-c10'\npolicy = 'fifo'\nseed = [0, 1]\n"
                    "n_training_servers = 2\nn_inference_servers = 2\n")
    result = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(tmp_path / "o"),
                                       "--ray"])
    assert result.exit_code == 2
    assert "--ray needs Ray, an optional dependency: pip install 'aryl[ray]'" in result.output
