#!/usr/bin/env python
"""triton-mini with each Python thread's name given to the kernel (`/proc/PID/task/TID/comm`, 15 bytes, without the
`triton_mini:` prefix): served_hop.py can then tell the instance's worker (`identity_0_0`) from its stub reader
(`identity_0_0:st`) and the process starter. A `--mini-launcher` (served_hop.py's default); `name_threads()` for others."""
import ctypes, sys, threading

def name_threads():
    "From now on every thread started tells the kernel its name."
    prctl, start = ctypes.CDLL(None, use_errno=True).prctl, threading.Thread._bootstrap_inner
    def named(self):
        try: prctl(15, self.name.removeprefix('triton_mini:').encode()[:15], 0, 0, 0)   # 15: PR_SET_NAME
        except Exception: pass
        start(self)
    threading.Thread._bootstrap_inner = named

if __name__ == '__main__':
    name_threads()
    from triton_mini.cli import main
    sys.exit(main(sys.argv[1:]))
