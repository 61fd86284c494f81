#!/usr/bin/env python
"""triton-mini whose stubs answer the identity model by echoing its input, without the Python backend (a
`--mini-launcher` for bench/served_hop.py): the floor of the stub hop, whatever a model or pb_utils cost.

    python bench/served_hop.py --runs thread process process:bench/echo_stub.py --concurrency 1 8 --rounds 3

The stubs are started by the server with its environment: PYTHONPATH gains bench/echo_stub, whose sitecustomize.py
patches `Stub._run_one` when HOP_ECHO=1 (only the identity model's INPUT0 -> OUTPUT0). Threads are named as by
bench/thread_names.py, so served_hop.py splits the CPU by thread."""
import os, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (os.environ.get('PYTHONPATH'), str(HERE / 'echo_stub')) if p)
os.environ['HOP_ECHO'] = '1'
sys.path.insert(0, str(HERE))
from thread_names import name_threads  # noqa: E402

if __name__ == '__main__':
    name_threads()
    from triton_mini.cli import main
    sys.exit(main(sys.argv[1:]))
