"""Pure-Python twins of the compiled kernels, written for reading.

Same signatures, same results and same tie rules as :mod:`aryl._core`; used as
oracles in differential tests and selectable with ``backend="reference"``.
"""
