#!/usr/bin/env python
"""triton-mini with its dynamic batcher traced: at exit, every batch (size, how long its oldest request waited,
why it was sent) and every arrival go to $BATCH_TRACE (JSON). An `--exp-launcher`/`--mini-launcher` for
bench/run.py, or run by bench/batching.py, which summarizes the trace next to both servers' batch_stats.

Why it was sent: `preferred` (the batch reached a preferred size or max_batch_size), `delay` (the oldest request
waited max_queue_delay), `other` (the next request does not fit: another shape, or the batcher is stopping);
`timed_wait`: the worker slept on a timed wait for this batch; `evals`: how many times the worker ran the rule
for it (one per wake-up). Nothing here changes a decision; BATCH_WAKE_EVERY=1 forced the old rule on branch `batching` (not merged; main
has only that rule, so it changes nothing here).
"""
import atexit, gc, json, os, signal, sys, threading, time
import triton_mini.scheduler as S

if os.environ.get('BATCH_WAKE_EVERY') == '1':   # the rule before 2026-12-05: every arrival wakes a waiting worker
    S.DynamicBatcher._wakes = lambda self, entry: True
    S.DynamicBatcher._missing = lambda self, head: None

def _install():
    "Patch the batcher to record every batch and arrival (only when $BATCH_TRACE says where to write them)."
    global T
    T = {'arrivals': [], 'batches': [], 'settled': [], 'gc': [], 'resolved': []}
    import triton_mini.server as server
    _resolve = server._resolve
    def resolve(fut, resp):   # on the event loop: the response is about to be written
        T['resolved'].append(time.monotonic_ns())
        return _resolve(fut, resp)
    server._resolve = resolve
    def on_gc(phase, info):   # every collection: (start, end, generation), to line stalls up with late batches
        if phase == 'start': _local.gc_start = time.monotonic_ns()
        else: T['gc'].append((getattr(_local, 'gc_start', 0), time.monotonic_ns(), info['generation']))
    gc.callbacks.append(on_gc)
    _decide = S.next_batch
    _local = threading.local()

    def traced_next_batch(sizes, keys, max_batch_size, preferred, waited_ns, max_delay_ns):
        n, wait = _decide(sizes, keys, max_batch_size, preferred, waited_ns, max_delay_ns)
        _local.evals = getattr(_local, 'evals', 0) + 1
        _local.last = (n, wait, sum(sizes[:n]), len(sizes), waited_ns, max_delay_ns, max_batch_size, preferred)
        if wait is not None: _local.timed = True
        return n, wait
    S.next_batch = traced_next_batch

    _enqueue = S.DynamicBatcher.enqueue
    def enqueue(self, req):
        T['arrivals'].append(self.clock())
        return _enqueue(self, req)
    S.DynamicBatcher.enqueue = enqueue

    _pop = S.DynamicBatcher._pop
    def pop(self, n):
        _local.timed = getattr(_local, 'timed', False)
        last = getattr(_local, 'last', None)
        now = self.clock()
        if last is not None:
            _, _, total, queued, waited, delay, mbs, pref = last
            why = 'preferred' if total in pref or total >= mbs else 'delay' if delay and waited >= delay else 'other'
            T['batches'].append({'t': now, 'n': n, 'size': total, 'queued': queued, 'waited_us': waited / 1e3,
                                 'why': why, 'timed_wait': _local.timed, 'evals': getattr(_local, 'evals', 1)})
        _local.evals = 0
        _local.timed = False
        return _pop(self, n)
    S.DynamicBatcher._pop = pop

    _settle = S.Scheduler._settle
    def settle(self, inst, batch, responses, timing, failed, start, end):
        out = _settle(self, inst, batch, responses, timing, failed, start, end)
        if isinstance(self, S.DynamicBatcher): T['settled'].append((start, end, self.clock()))
        return out
    S.Scheduler._settle = settle

    def _dump():
        path = os.environ.get('BATCH_TRACE')
        if path:
            with open(path, 'w') as f: json.dump(T, f)
    atexit.register(_dump)

    def _reset(*_):
        for v in T.values(): v.clear()
    signal.signal(signal.SIGUSR1, _reset)   # bench/batching.py: the warm-up is over

T = None
if os.environ.get('BATCH_TRACE'): _install()

from triton_mini.cli import main
sys.exit(main(sys.argv[1:]))
