# cython: language_level=3
"""Placeholder: the MCKP kernel is being written (issue: aryl.solve)."""

def _kernel_name():
    return "mckp"
