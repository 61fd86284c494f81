#!/usr/bin/env python
"""triton-mini with cProfile on in every thread; at exit the merged stats go to $PROF_OUT (pstats format).

    PROF_OUT=/tmp/mini.prof taskset -c 0 python bench/cprofile_launch.py --model-repository=bench/repo ...
    python -c "import pstats; pstats.Stats('/tmp/mini.prof').sort_stats('tottime').print_stats(30)"

What bench/results/2026-12-05-profile-identity.md was made with (py-spy needs no launcher, but is not installed
everywhere). One profiler per thread: `threading.setprofile` starts one in each new thread (the scheduler's
workers), the main thread's (the event loop) starts here.
"""
import atexit, cProfile, os, pstats, sys, threading

profiles = []
def _start(frame, event, arg):
    sys.setprofile(None)
    p = cProfile.Profile(); profiles.append(p); p.enable()
threading.setprofile(_start)
main_profile = cProfile.Profile(); main_profile.enable()

def _dump():
    main_profile.disable()
    stats = pstats.Stats(main_profile)
    for p in profiles:
        p.snapshot_stats()
        other = pstats.Stats(main_profile); other.stats = p.stats
        stats.add(other)
    stats.dump_stats(os.environ.get('PROF_OUT', 'triton_mini.prof'))
atexit.register(_dump)

from triton_mini.cli import main
main(sys.argv[1:])
