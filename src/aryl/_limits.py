"""Bounds on durations shared by every way into the model.

Every entry point (traces, the simulator's configuration, the JSON state of
:func:`aryl.schedule`, the Kubernetes controller's TrainingJobs) refuses values
beyond these with an error that names the row or field, so that no finish
time, JCT or JCT reduction of a pass can overflow to infinity and change a
decision without a word.
"""

from __future__ import annotations

__all__ = ["MAX_DURATION_S", "MAX_REMAINING_S"]

#: Largest duration of a job in a trace, and of any configured period or
#: duration (about 32 years): keeps every event time of a replay finite.
MAX_DURATION_S: float = 1e9

#: Largest ``remaining_s`` (and ``checkpoint_remaining_s``) of a job in a cluster
#: state (about 31,700 years).  Larger than :data:`MAX_DURATION_S` so that a
#: state taken from any replay (whose restarts add their cost to the remaining
#: time) is accepted; far enough below the largest float that ``R / T(w)`` and
#: the JCT reductions built from it stay finite.
MAX_REMAINING_S: float = 1e12
