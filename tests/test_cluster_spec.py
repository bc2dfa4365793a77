"""Cluster specs (aryl.cluster): pools, TOML files, presets, validation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl.cluster import CLUSTER_PRESETS, ClusterSpec, Pool, cluster_preset, load_cluster_spec
from aryl.errors import InvalidInputError
from aryl.sim.config import DEFAULT_INFERENCE_SERVERS, DEFAULT_TRAINING_SERVERS

DOC = Path(__file__).resolve().parents[1] / "docs" / "cluster.md"

LYRA_TOML = """\
[[pools]]
name = "v100"
role = "training"
n_servers = 30
gpus_per_server = 8
gpu_type = "V100"

[[pools]]
name = "a100"
role = "training"
n_servers = 12
gpus_per_server = 8
gpu_type = "A100"

[[pools]]
name = "t4"
role = "inference"
n_servers = 32
gpus_per_server = 4
gpu_type = "T4"
"""


def test_default_preset_is_todays_homogeneous_cluster() -> None:
    spec = cluster_preset("default")
    assert spec == ClusterSpec.from_counts(46, 16)
    assert (spec.n_training_servers, spec.n_inference_servers) == (
        DEFAULT_TRAINING_SERVERS, DEFAULT_INFERENCE_SERVERS) == (46, 16)
    assert [(p.name, p.role, p.n_servers, p.gpus_per_server, p.gpu_type) for p in spec.pools] == [
        ("training", "training", 46, 8, "V100"), ("inference", "inference", 16, 8, "V100")]
    assert spec.is_homogeneous
    assert spec.gpu_types == ("V100",)


def test_lyra_preset_sizes_follow_the_documented_arithmetic() -> None:
    spec = cluster_preset("lyra")
    assert spec == load_cluster_spec_text(LYRA_TOML)
    assert not spec.is_homogeneous
    assert spec.gpu_types == ("V100", "A100", "T4")
    v100, a100 = spec.training_pools
    (t4,) = spec.inference_pools
    # training capacity in V100-equivalents with one A100 = 4/3 V100: 240 + 128 = 368,
    # the default cluster's 46 x 8 GPUs; inference keeps the default's 16 x 8 = 128 GPUs
    assert v100.n_gpus + a100.n_gpus * 4 / 3 == 46 * 8 == 368
    assert t4.n_gpus == 16 * 8 == 128
    assert t4.gpus_per_server == 4


def test_lyra_a100_factor_lies_between_the_measured_means_on_itp_c07() -> None:
    # docs/cluster.md: on itp-c07 an A100 GPU does 1.32 (work-weighted harmonic mean) to
    # 1.41 (GPU-time-weighted mean) V100 GPUs of work; the preset uses 4/3 in between
    from aryl.speeds import SpeedTable, assign_families
    from aryl.traces import load_trace

    jobs = load_trace("itp-c07").jobs
    table = SpeedTable.bundled()
    fam = assign_families(jobs, seed=0)
    gpus = jobs["gpus"].to_numpy()
    gpu_s = gpus * jobs["duration_s"].to_numpy()
    ratio = {}
    for typ in ("A100", "T4"):
        ratio[typ] = np.array([table.speed(f, typ, int(g), 1, int(g))
                               for f, g in zip(fam, gpus, strict=True)])
    arith = float((ratio["A100"] * gpu_s).sum() / gpu_s.sum())
    harm = float(gpu_s.sum() / (gpu_s / ratio["A100"]).sum())
    assert harm == pytest.approx(1.32, abs=0.005)
    assert arith == pytest.approx(1.41, abs=0.005)
    assert harm < 4 / 3 < arith
    t4 = float((ratio["T4"] * gpu_s).sum() / gpu_s.sum())
    assert 0.455 < t4 < 0.475  # "a loaned T4 does 0.46-0.47 of a V100's work"


def load_cluster_spec_text(text: str) -> ClusterSpec:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "spec.toml"
        p.write_text(text, encoding="utf-8")
        return load_cluster_spec(p)


def test_docs_show_the_lyra_preset_as_a_file() -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    assert load_cluster_spec_text(blocks[0]) == cluster_preset("lyra")


def test_preset_names_and_did_you_mean() -> None:
    assert sorted(CLUSTER_PRESETS) == ["default", "lyra"]
    with pytest.raises(InvalidInputError, match=r"unknown cluster preset 'lyr'; presets: "
                                                r"default, lyra; did you mean 'lyra'\?"):
        cluster_preset("lyr")
    with pytest.raises(InvalidInputError, match="unknown cluster preset 'zzz'; presets"):
        cluster_preset("zzz")


@pytest.mark.parametrize("name", sorted(CLUSTER_PRESETS))
def test_presets_round_trip_through_toml(tmp_path: Path, name: str) -> None:
    spec = cluster_preset(name)
    p = tmp_path / f"{name}.toml"
    p.write_text(spec.to_toml(), encoding="utf-8")
    assert load_cluster_spec(p) == spec


_names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,8}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_names, st.sampled_from(["training", "inference"]),
                          st.integers(0, 500), st.integers(1, 16), _names),
                min_size=1, max_size=5, unique_by=lambda t: t[0]))
def test_any_valid_spec_round_trips(pools: list[tuple[str, str, int, int, str]]) -> None:
    spec = ClusterSpec(tuple(Pool(*p) for p in pools))
    assert load_cluster_spec_text(spec.to_toml()) == spec
    assert ClusterSpec.from_dict(spec.to_dict()) == spec


def test_server_layout_puts_training_pools_first() -> None:
    spec = ClusterSpec([Pool("inf", "inference", 1, 4, "T4"), Pool("a", "training", 2, 8, "A100"),
                        Pool("b", "training", 1, 8, "V100")])
    assert isinstance(spec.pools, tuple)
    assert [p.name for p in spec.server_pools()] == ["a", "a", "b", "inf"]
    assert (spec.n_training_servers, spec.n_inference_servers) == (3, 1)
    assert spec.pool("b").gpu_type == "V100"
    with pytest.raises(InvalidInputError, match="no pool 'c'; pools: inf, a, b"):
        spec.pool("c")


_GOOD = {"name": "a100", "role": "training", "n_servers": 12, "gpus_per_server": 8,
         "gpu_type": "A100"}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("role", "train", "must be 'training' or 'inference'"),
        ("n_servers", -2, "must be an integer >= 0, got -2"),
        ("n_servers", 1.5, "must be an integer >= 0, got 1.5"),
        ("n_servers", True, "must be an integer >= 0, got True"),
        ("gpus_per_server", 0, "must be an integer >= 1, got 0"),
        ("gpus_per_server", "8", "must be an integer >= 1, got '8'"),
        ("gpu_type", "", "must be a non-empty string"),
        ("gpu_type", "V 100", "must be a non-empty string"),
        ("gpu_type", 100, "must be a non-empty string"),
    ],
)
def test_file_errors_name_the_file_pool_and_field(tmp_path: Path, field: str, value: object,
                                                  message: str) -> None:
    bad = dict(_GOOD, **{field: value})
    spec = {"pools": [dict(_GOOD, name="v100"), bad]}
    p = tmp_path / "bad.toml"
    p.write_text(_toml(spec), encoding="utf-8")
    with pytest.raises(InvalidInputError) as exc:
        load_cluster_spec(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}: pools[1]: pool 'a100', field {field!r}: "), msg
    assert message in msg
    # the same error from the dataclass, without the file
    with pytest.raises(InvalidInputError, match=rf"^pool 'a100', field '{field}': "):
        Pool(**bad)  # type: ignore[arg-type]


def _toml(spec: dict) -> str:
    import json

    out = []
    for pool in spec["pools"]:
        out.append("[[pools]]")
        for k, v in pool.items():
            text = json.dumps(v)  # JSON strings, numbers and true/false are valid TOML
            out.append(f"{k} = {text}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    ("pools", "message"),
    [
        ([dict(_GOOD, name="")], r"pools\[0\]: pool, field 'name': must be a non-empty string"),
        ([{k: v for k, v in _GOOD.items() if k != "gpu_type"}],
         r"pools\[0\] \('a100'\), field 'gpu_type': missing"),
        ([dict(_GOOD, servers=3)], r"pools\[0\] \('a100'\): unknown field\(s\) \['servers'\]"),
        ([_GOOD, _GOOD], r"pool 'a100', field 'name': duplicate pool name"),
    ],
)
def test_structural_errors_name_the_pool_and_field(tmp_path: Path, pools: list,
                                                   message: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(_toml({"pools": pools}), encoding="utf-8")
    with pytest.raises(InvalidInputError, match=rf"^{re.escape(str(p))}: {message}"):
        load_cluster_spec(p)


def test_document_level_errors(tmp_path: Path) -> None:
    p = tmp_path / "x.toml"
    p.write_text("[[pools]]\nname = \"a\"\nrole = \n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=rf"^{re.escape(str(p))}: not valid TOML: .*line 3"):
        load_cluster_spec(p)
    p.write_text("cluster = 'x'\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"unknown top-level key\(s\) \['cluster'\]"):
        load_cluster_spec(p)
    p.write_text("", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"needs at least one \[\[pools\]\] table"):
        load_cluster_spec(p)
    p.write_bytes(b"\xff\xfe")
    with pytest.raises(InvalidInputError, match="not UTF-8"):
        load_cluster_spec(p)
    with pytest.raises(InvalidInputError, match="cannot read cluster spec"):
        load_cluster_spec(tmp_path / "missing.toml")
    with pytest.raises(InvalidInputError, match="at least one pool"):
        ClusterSpec(())


def test_from_counts_validates_like_the_cli_options() -> None:
    with pytest.raises(InvalidInputError, match=r"pool 'inference', field 'n_servers'"):
        ClusterSpec.from_counts(46, -1)
    with pytest.raises(InvalidInputError, match=r"pool 'training', field 'gpus_per_server'"):
        ClusterSpec.from_counts(46, 16, 0)
    spec = ClusterSpec.from_counts(10, 0, 4, "A100")
    assert [(p.n_servers, p.gpus_per_server, p.gpu_type) for p in spec.pools] == [
        (10, 4, "A100"), (0, 4, "A100")]
    assert len(spec.server_pools()) == 10
