#!/usr/bin/env python
"""triton-mini with Python's garbage-collector defaults (`TRITON_MINI_GC_TUNING=0`): an `--exp-launcher` for
bench/run.py, to put the command's `tune_gc` (10_cli) side by side with the defaults."""
import os, sys
os.environ['TRITON_MINI_GC_TUNING'] = '0'
from triton_mini.cli import main
sys.exit(main(sys.argv[1:]))
