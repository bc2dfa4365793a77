"""Request traces: each reader on a small handmade file, located errors for bad
rows (the job traces' RowChecker), the bundled Azure presets and the rate scale.
Expected values written out by hand (epoch seconds by calendar.timegm)."""

from __future__ import annotations

import calendar
import gzip
from pathlib import Path

import numpy as np
import pytest

from aryl.errors import InvalidInputError, TraceFormatError
from aryl.traces.requests import load_requests, read_load_latencies, scale_rate
from aryl.traces.validate import InvalidRowsError


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


ALIBABA = """gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,\
negative_prompt_length,num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,num_lora
2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,32.0,G0000,63.0,26.0,1.0,30.0,M0000,0
2024-11-15 16:58:00,TXT_2_IMG,PENDING,0.0,G0001,93.0,,1.0,40.0,M0001,0
2024-11-15 16:57:55,IMG_2_IMG,FAILED,4.0,G0001,93.0,,8.0,40.0,M0002,0
"""


def test_alibaba_genai_rows_rebased_and_pending_dropped(tmp_path: Path) -> None:
    tr = load_requests(_write(tmp_path, "lora.csv", ALIBABA))
    assert tr.format == "alibaba-genai"
    # PENDING never ran: always dropped and counted, not an error
    assert tr.dropped == {"not_served": 1}
    df = tr.requests
    # sorted by time: 16:57:50 (0 s), 16:57:55 (+5 s, the FAILED one: it held a GPU 4 s)
    assert df["arrival_time_s"].tolist() == [0.0, 5.0]
    assert df["service_s"].tolist() == [32.0, 4.0]
    assert df["model"].tolist() == ["M0000", "M0002"]
    # naive times are Asia/Shanghai (UTC+8): 16:57:50 local = 08:57:50 UTC
    assert tr.meta["epoch_s"] == calendar.timegm((2024, 11, 15, 8, 57, 50))
    assert tr.span_s == 5.0
    assert tr.offered_load_gpus == pytest.approx(36.0 / 5.0)


AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:17:03.9799600,4808,10
2023-11-16 18:17:04.0319600,3180,8
"""


def test_azure_tokens_to_gpu_seconds(tmp_path: Path) -> None:
    tr = load_requests(_write(tmp_path, "az.csv", AZURE))
    assert tr.format == "azure-llm"
    # A100 assumption: 8000 prefill and 40 decode tokens/s:
    # 4808/8000 + 10/40 = 0.601 + 0.25 = 0.851; 3180/8000 + 8/40 = 0.3975 + 0.2 = 0.5975
    assert tr.requests["service_s"].tolist() == pytest.approx([0.851, 0.5975])
    assert tr.requests["arrival_time_s"].tolist() == pytest.approx([0.0, 0.052])
    tr2 = load_requests(_write(tmp_path, "az.csv", AZURE), prefill_tokens_per_s=1000.0,
                        decode_tokens_per_s=10.0)
    assert tr2.requests["service_s"].tolist() == pytest.approx([4.808 + 1.0, 3.18 + 0.8])
    with pytest.raises(InvalidInputError, match="gpu_type"):
        load_requests(_write(tmp_path, "az.csv", AZURE), gpu_type="T4")


def test_canonical_and_located_errors(tmp_path: Path) -> None:
    ok = load_requests(_write(tmp_path, "c.csv", "arrival_time_s,service_s,model\n3,1.5,m\n1,2,\n"))
    assert ok.requests["arrival_time_s"].tolist() == [1.0, 3.0]
    assert ok.requests["model"].tolist() == ["", "m"]
    cases = [
        ("arrival_time_s,service_s\n1,2\n2,\n", 3, "service_s", "missing_value"),
        ("arrival_time_s,service_s\n1,2\n2,x\n", 3, "service_s", "not_a_number"),
        ("arrival_time_s,service_s\n1,0\n", 2, "service_s", "zero_duration"),
        ("arrival_time_s,service_s\n1,2\n1,-3\n", 3, "service_s", "negative_duration"),
        ("arrival_time_s,service_s\n1,2\n-1,3\n", 3, "arrival_time_s", "negative_duration"),
        ("arrival_time_s,service_s\n1,2\n1,inf\n", 3, "service_s", "not_a_number"),
        # beyond MAX_DURATION_S (1e9 s): a 1e308 s service made the replay print a
        # 309-digit mean wait, a 1e300 s arrival a 300-digit step count
        ("arrival_time_s,service_s\n1,2\n2,1e308\n", 3, "service_s", "long_duration"),
        ("arrival_time_s,service_s\n1,2\n2,1000000000.0000001\n", 3, "service_s",
         "long_duration"),
        ("arrival_time_s,service_s\n1,2\n1e300,3\n", 3, "arrival_time_s", "long_duration"),
    ]
    for text, line, column, kind in cases:
        with pytest.raises(InvalidRowsError) as err:
            load_requests(_write(tmp_path, "bad.csv", text))
        assert (err.value.line, err.value.column, err.value.kind) == (line, column, kind), text
        assert "bad.csv" in str(err.value)
    edge = load_requests(_write(tmp_path, "edge.csv",
                                "arrival_time_s,service_s\n1e9,1\n0,1e9\n"))
    assert edge.requests["service_s"].tolist() == [1e9, 1.0]
    assert edge.requests["arrival_time_s"].tolist() == [0.0, 1e9]
    long = load_requests(_write(tmp_path, "long.csv", "arrival_time_s,service_s\n1,2\n2,1e12\n"),
                         on_invalid="drop")
    assert long.n_requests == 1
    assert long.dropped == {"long_duration": 1}
    dropped = load_requests(_write(tmp_path, "bad.csv", "arrival_time_s,service_s\n1,2\n2,x\n"),
                            on_invalid="drop")
    assert dropped.n_requests == 1
    assert dropped.dropped == {"not_a_number": 1}


def test_bad_rows_of_the_real_formats_are_located(tmp_path: Path) -> None:
    bad_time = ALIBABA.replace("2024-11-15 16:57:55", "yesterday")
    with pytest.raises(InvalidRowsError) as err:
        load_requests(_write(tmp_path, "lora.csv", bad_time))
    assert (err.value.line, err.value.column, err.value.kind) == (4, "gmt_create", "bad_timestamp")
    frac = AZURE.replace("3180,8", "3180,8.5")
    with pytest.raises(InvalidRowsError) as err:
        load_requests(_write(tmp_path, "az.csv", frac))
    assert (err.value.line, err.value.column, err.value.kind) == (
        3, "GeneratedTokens", "not_an_integer")
    with pytest.raises(TraceFormatError) as err2:
        load_requests(_write(tmp_path, "x.csv", "arrival_time_s,duration\n1,2\n"))
    assert err2.value.column == "service_s"
    assert err2.value.line == 1
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_requests(tmp_path / "nope.csv")


def test_bundled_azure_presets_match_the_public_row_counts() -> None:
    code = load_requests("azure-code")
    conv = load_requests("azure-conv")
    # the Splitwise traces: 8,819 and 19,366 data rows (the files' line counts - 1)
    assert (code.n_requests, conv.n_requests) == (8819, 19366)
    assert code.dropped == {}
    assert conv.dropped == {}
    assert code.source == "azure-code"
    assert 3000 < code.span_s < 3700
    assert 3000 < conv.span_s < 3700


def test_gzip_file_reads_like_the_plain_one(tmp_path: Path) -> None:
    path = tmp_path / "r.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("arrival_time_s,service_s\n0,1\n2,3\n")
    assert load_requests(path).requests["service_s"].tolist() == [1.0, 3.0]


def test_rate_scale_whole_and_fractional() -> None:
    base = load_requests("azure-code")
    n = base.n_requests
    s3 = scale_rate(base, 3.0, seed=1)
    assert s3.n_requests == 3 * n
    # every service time appears exactly 3 times as often
    a, b = np.sort(base.requests["service_s"].to_numpy()), np.sort(s3.requests["service_s"])
    assert np.array_equal(np.repeat(a, 3), b)
    assert np.all(np.diff(s3.requests["arrival_time_s"].to_numpy()) >= 0)
    assert s3.meta["rate_scale"] == 3.0
    # copies land within one mean gap after their original: span grows by < one gap
    gap = base.span_s / (n - 1)
    assert s3.span_s < base.span_s + gap
    half = scale_rate(base, 0.5, seed=2)
    # Binomial(n, 0.5): mean n/2, sd sqrt(n)/2 = 47; 5 sd
    assert abs(half.n_requests - n / 2) < 5 * 47
    assert scale_rate(base, 3.0, seed=1).requests.equals(s3.requests)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InvalidInputError, match="request_rate_scale"):
            scale_rate(base, bad)


def test_load_latencies_in_seconds_and_located_errors(tmp_path: Path) -> None:
    path = _write(tmp_path, "lat.csv", "timestamp_anon,value,container_ip\n1,2639.0,a\n2,39010,b\n")
    assert read_load_latencies(path).tolist() == [2.639, 39.01]
    bad = _write(tmp_path, "lat.csv", "timestamp_anon,value,container_ip\n1,2639.0,a\n2,,b\n")
    with pytest.raises(InvalidRowsError) as err:
        read_load_latencies(bad)
    assert (err.value.line, err.value.column, err.value.kind) == (3, "value", "missing_value")


def test_a_bad_request_row_is_an_input_error_in_every_command(tmp_path: Path) -> None:
    """``trace inspect --requests`` and ``replay --inference-requests``: exit 2 (an input
    error, like a bad job-trace row), the file, line and column named, no traceback."""
    from click.testing import CliRunner

    from aryl.cli import main

    bad = _write(tmp_path, "bad.csv", "arrival_time_s,service_s\n1,2\n2,x\n")
    for args in (["trace", "inspect", "--requests", "auto", str(bad)],
                 ["replay", "--inference-requests", str(bad), "--no-progress"]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2, (args, r.output)
        out = " ".join(r.output.split())
        for part in ("bad.csv", "line 3", "service_s"):
            assert part in out, (args, out)
        assert "Traceback" not in r.output
