"""`import c_python_backend_utils as c_utils` for model.py files run by triton_mini.

In Triton this is the pybind module the stub embeds (behind `triton_python_backend_utils`); a few models import it
directly, e.g. for `c_utils.shared_memory.free_memory()`. triton_mini installs it as a top-level module that
re-exports `triton_mini.pb_utils` (built in nbs/04_pb_utils.ipynb) and its `shared_memory`.
"""
from triton_mini.pb_utils import *  # noqa: F401,F403
from triton_mini.pb_utils import __all__, shared_memory  # noqa: F401
