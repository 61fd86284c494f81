#!/usr/bin/env python
"""Prototype launcher: a request that finds its stub instance idle is sent to the stub by the event-loop thread
itself, and the loop reads the answer (add_reader on `work`): no worker-thread hop. Then calls triton_mini.cli.main."""
import asyncio, os, sys, threading
from triton_mini import scheduler as S, server as SV
from triton_mini.stub_process import StubModelInstance, request_to_wire
from triton_mini.cli import main
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from thread_names import name_threads
name_threads()

D = S.DefaultScheduler
_enqueue = D.enqueue

def _take(self, inst=None):
    with self._cond:
        if inst is not None and getattr(inst, '_owner', None) == 'worker': inst._owner = None
        while not self._queue or (inst is not None and getattr(inst, '_owner', None) == 'loop'):
            if self._stopping and getattr(inst, '_owner', None) != 'loop' and not self._queue: return None
            claimed = inst is not None and getattr(inst, '_owner', None) == 'loop'
            if not claimed: self._idle += 1
            try: self._cond.wait()
            finally:
                if not claimed: self._idle -= 1
        self.stats.pending -= 1
        if inst is not None: inst._owner = 'worker'
        return [self._queue.popleft()]
D._take = _take

def _next_batch(self, inst):
    while True:
        try: return self._take(inst) if type(self) is D else self._take()
        except BaseException as e: self._take_failed(inst, e)
S.Scheduler._next_batch = _next_batch

LONE = os.environ.get('LOOP_HOP_LONE', '1') != '0'   # only a request that finds nothing else of its model in flight

_settle = S.Scheduler._settle
def settle(self, inst, batch, *a):
    with self._cond: self._in_flight = getattr(self, '_in_flight', 0) - len(batch)
    return _settle(self, inst, batch, *a)
S.Scheduler._settle = settle

def enqueue(self, req):
    loop = S.WAKE_AT_END_OF_TURN.get()
    if loop is None or type(self) is not D or self.rate_limiter is not None or req.cancelled: return _enqueue(self, req)
    with self._cond:
        self._check_accepting(req)
        inst = None
        lone = getattr(self, '_in_flight', 0) <= 0 or not LONE
        self._in_flight = getattr(self, '_in_flight', 0) + 1
        if not self._queue and lone:
            for i in self.instances:
                if (type(i) is StubModelInstance and getattr(i, '_owner', None) is None and i.healthy and not i.decoupled
                        and not i._gone and i.name not in self._running):
                    inst = i; break
        if inst is None:
            self._queue.append(req); self.stats.pending += 1
            if self._idle: self._wake_soon(loop)
            return
        inst._owner = 'loop'
        self._running[inst.name] = [req]
    _start_on_loop(self, inst, req, loop)
D.enqueue = enqueue

def _start_on_loop(self, inst, req, loop):
    start = self.clock()
    req.queue_end_ns = start
    inst.failed = False
    batch_id, fut = inst._register([req])
    fd = inst.work.sock.fileno()
    loop.add_reader(fd, _readable, self, inst, req, fut, start, loop)
    os.set_blocking(fd, True)   # uvloop (libuv's uv_poll_init) makes it non-blocking: the worker reads it blocking
    try: inst._send(('execute', batch_id, [request_to_wire(req)]))
    except OSError: pass

def _readable(self, inst, req, fut, start, loop):
    ch = inst.work
    while not fut.done():
        if not inst._read_work(): inst._died(); break
        if ch.end == ch.start: break   # nothing buffered: epoll tells when more comes
    if not fut.done(): return
    loop.remove_reader(ch.sock.fileno())
    out, inst.timing, inst.failed = fut.result()
    end = self.clock()
    self._took(end - start)
    with self._cond:
        inst._owner = None
        self._running.pop(inst.name, None)
        if self._queue: self._cond.notify_all()
    try: self._settle(inst, [req], out, inst.timing, inst.failed, start, end)
    except BaseException as e: self._running[inst.name] = [req]; self._run_failed(inst, e); self._running.pop(inst.name, None)

_put = SV.Completions.put
def put(self, fut, resp):
    if asyncio._get_running_loop() is self.loop: return self._settle(fut, resp)
    return _put(self, fut, resp)
SV.Completions.put = put

sys.exit(main(sys.argv[1:]))
