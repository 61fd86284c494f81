"""`import triton_python_backend_utils as pb_utils` for model.py files run by triton_mini.

Real Triton injects this module into each Python-backend stub process. triton_mini installs it as
a top-level module that re-exports `triton_mini.pb_utils` (built in nbs/04_python_backend.ipynb),
so a model.py written for Triton imports unchanged, in the server and in a plain pytest run.
"""
from triton_mini.pb_utils import *  # noqa: F401,F403
from triton_mini.pb_utils import __all__  # noqa: F401
