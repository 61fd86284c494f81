#!/usr/bin/env python
"""triton-mini with big tensors crossing the stub hop through shared memory (issue 42; `TRITON_MINI_STUB_SHM=1`), for
`bench/run.py --exp-launcher bench/stub_shm.py`: the same server with the switch on, interleaved with another setting.
The switch is on by default since 2026-12-06 (bench/results/2026-12-06-stub-shm-quiet.md), so compare with it off:

    TRITON_MINI_STUB_SHM=0 python bench/run.py --workload binary256k --exp-launcher bench/stub_shm.py
"""
import os, sys
os.environ['TRITON_MINI_STUB_SHM'] = '1'   # before triton_mini is imported: the server reads it once
from triton_mini.cli import main

if __name__ == '__main__': sys.exit(main(sys.argv[1:]))
