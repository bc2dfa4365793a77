"""Named traces bundled with the package (usable wherever a trace path is).

==========  ======  ==============================================================
name        jobs    content
==========  ======  ==============================================================
itp-c01     1,595   Microsoft ITP 2021 cluster01
itp-c02     5,778   cluster02
itp-c03     3,011   cluster03
itp-c04     15,802  cluster04
itp-c05     3,629   cluster05
itp-c06     2,396   cluster06
itp-c07     12,699  cluster07 (the default replay: 60 days, 1-16 GPUs per job)
itp-c08     13,047  cluster08
itp-c09     11,134  cluster09
itp-c10     260     cluster10
itp-all     69,351  all ten clusters merged on the common time base
==========  ======  ==============================================================

Every preset job carries ``tenant = "clusterNN"``.  The files are the MIT-licensed
``raw-traces`` CSVs of github.com/microsoft/elasticflow-traces, gzip-compressed,
under ``aryl/data/itp/`` (see ``aryl/data/README.md``).
"""

from __future__ import annotations

import dataclasses
from importlib import resources
from pathlib import Path

__all__ = ["DEFAULT_PRESET", "PRESETS", "Preset", "list_presets", "preset_files"]

DEFAULT_PRESET = "itp-c07"

_ITP_ROWS = (1595, 5778, 3011, 15802, 3629, 2396, 12699, 13047, 11134, 260)


@dataclasses.dataclass(frozen=True)
class Preset:
    """A bundled trace.

    Attributes
    ----------
    name : str
    files : tuple of str
        Paths relative to ``aryl/data``.
    tenants : tuple of str
        The tenant given to each file's jobs.
    n_jobs : int
        Documented row count.
    format : str
        Reader used for the files.
    description : str
    """

    name: str
    files: tuple[str, ...]
    tenants: tuple[str, ...]
    n_jobs: int
    format: str
    description: str


def _itp(i: int) -> Preset:
    cluster = f"cluster{i:02d}"
    return Preset(
        name=f"itp-c{i:02d}",
        files=(f"itp/{cluster}.csv.gz",),
        tenants=(cluster,),
        n_jobs=_ITP_ROWS[i - 1],
        format="itp",
        description=f"Microsoft ITP 2021 {cluster} (MIT)",
    )


PRESETS: dict[str, Preset] = {p.name: p for p in (_itp(i) for i in range(1, 11))}
PRESETS["itp-all"] = Preset(
    name="itp-all",
    files=tuple(f"itp/cluster{i:02d}.csv.gz" for i in range(1, 11)),
    tenants=tuple(f"cluster{i:02d}" for i in range(1, 11)),
    n_jobs=sum(_ITP_ROWS),
    format="itp",
    description="Microsoft ITP 2021, all ten clusters merged (MIT)",
)


def list_presets() -> list[Preset]:
    """The bundled traces, in name order."""
    return [PRESETS[name] for name in sorted(PRESETS)]


def preset_files(preset: Preset) -> list[Path]:
    """Absolute paths of a preset's files inside the installed package."""
    root = resources.files("aryl") / "data"
    return [Path(str(root / rel)) for rel in preset.files]
