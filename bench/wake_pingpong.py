"""A loop thread and a worker thread handing a future back and forth: us and context switches per round trip for
several ways of waking each other (bench/results/2026-12-05-pipe-wake.md). Run pinned to one core:

    taskset -c 0 python bench/wake_pingpong.py cond lock lock_pipe cond_pipe cond_eventfd pipe_cst pipe_pipe pipe_pipe2 lock_cst
"""
import asyncio, threading, time, sys, collections, _thread, os
import uvloop

N = 20000
async def run(kind):
    global CS0
    loop = asyncio.get_running_loop()
    q = collections.deque()
    if kind == 'cond':
        cond = threading.Condition()
        def worker():
            while True:
                with cond:
                    while not q: cond.wait()
                    fut = q.popleft()
                if fut is None: return
                loop.call_soon_threadsafe(fut.set_result, 1)
        def put(f):
            with cond:
                q.append(f); cond.notify()
    elif kind == 'lock':
        sem = _thread.allocate_lock(); sem.acquire()
        def worker():
            while True:
                sem.acquire()
                fut = q.popleft()
                if fut is None: return
                loop.call_soon_threadsafe(fut.set_result, 1)
        def put(f):
            q.append(f); sem.release()
    elif kind == 'lock_pipe':   # reply through an os pipe the loop reads (add_reader)
        sem = _thread.allocate_lock(); sem.acquire()
        r, w = os.pipe(); os.set_blocking(r, False)
        done = collections.deque()
        def on_read():
            os.read(r, 4096)
            while done: done.popleft().set_result(1)
        loop.add_reader(r, on_read)
        def worker():
            while True:
                sem.acquire()
                fut = q.popleft()
                if fut is None: return
                done.append(fut); os.write(w, b'x')
        def put(f):
            q.append(f); sem.release()
    elif kind == 'cond_pipe':
        cond = threading.Condition()
        r, w = os.pipe(); os.set_blocking(r, False)
        done = collections.deque()
        def on_read():
            os.read(r, 4096)
            while done: done.popleft().set_result(1)
        loop.add_reader(r, on_read)
        def worker():
            while True:
                with cond:
                    while not q: cond.wait()
                    fut = q.popleft()
                if fut is None: return
                done.append(fut); os.write(w, b'x')
        def put(f):
            with cond:
                q.append(f); cond.notify()
    elif kind == 'cond_eventfd':
        cond = threading.Condition()
        efd = os.eventfd(0, os.EFD_NONBLOCK)
        done = collections.deque()
        def on_read():
            os.eventfd_read(efd)
            while done: done.popleft().set_result(1)
        loop.add_reader(efd, on_read)
        def worker():
            while True:
                with cond:
                    while not q: cond.wait()
                    fut = q.popleft()
                if fut is None: return
                done.append(fut); os.eventfd_write(efd, 1)
        def put(f):
            with cond:
                q.append(f); cond.notify()
    elif kind.startswith('pipe_pipe'):   # worker blocks in os.read; loop wakes it with os.write
        r1, w1 = os.pipe()
        efd = os.eventfd(0, os.EFD_NONBLOCK)
        done = collections.deque()
        def on_read():
            os.eventfd_read(efd)
            while done: done.popleft().set_result(1)
        loop.add_reader(efd, on_read)
        def worker():
            while True:
                os.read(r1, 1)
                fut = q.popleft()
                if fut is None: return
                done.append(fut); os.eventfd_write(efd, 1)
        if kind == 'pipe_pipe':
            def put(f): q.append(f); os.write(w1, b'x')
        else:
            def put(f): q.append(f); loop.call_soon(os.write, w1, b'x')
    elif kind == 'pipe_cst':
        r1, w1 = os.pipe()
        def worker():
            while True:
                os.read(r1, 1)
                fut = q.popleft()
                if fut is None: return
                loop.call_soon_threadsafe(fut.set_result, 1)
        def put(f): q.append(f); os.write(w1, b'x')
    elif kind == 'pipe_pipe2':   # reply through an os.pipe, not eventfd
        r1, w1 = os.pipe()
        r2, w2 = os.pipe(); os.set_blocking(r2, False)
        done = collections.deque()
        def on_read():
            os.read(r2, 4096)
            while done: done.popleft().set_result(1)
        loop.add_reader(r2, on_read)
        def worker():
            while True:
                os.read(r1, 1)
                fut = q.popleft()
                if fut is None: return
                done.append(fut); os.write(w2, b'x')
        def put(f): q.append(f); os.write(w1, b'x')
    elif kind == 'lock_cst':
        sem = _thread.allocate_lock(); sem.acquire()
        def worker():
            while True:
                sem.acquire()
                fut = q.popleft()
                if fut is None: return
                loop.call_soon_threadsafe(fut.set_result, 1)
        def put(f):
            q.append(f); loop.call_soon(sem.release)
    t = threading.Thread(target=worker, daemon=True); t.start()
    await asyncio.sleep(0.01)
    CS0=0
    for tid in os.listdir('/proc/self/task'):
        for line in open(f'/proc/self/task/{tid}/status'):
            if 'ctxt_switches' in line: CS0+=int(line.split()[1])
    t0 = time.perf_counter()
    for i in range(N):
        f = loop.create_future(); put(f); await f
    dt = time.perf_counter() - t0
    def cs():
        tot=0
        for tid in os.listdir('/proc/self/task'):
            for line in open(f'/proc/self/task/{tid}/status'):
                if 'ctxt_switches' in line: tot+=int(line.split()[1])
        return tot
    print('  ctx switches/rt', (cs()-CS0)/N, end=' ')
    put(None)
    return dt / N * 1e6

async def inline():
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    for i in range(N):
        f = loop.create_future(); loop.call_soon(f.set_result, 1); await f
    return (time.perf_counter() - t0) / N * 1e6

uvloop.install()
for kind in sys.argv[1:] or ['cond', 'lock', 'lock_pipe']:
    for sw in (0.005,):
        sys.setswitchinterval(sw)
        r = [asyncio.run(run(kind)) for _ in range(3)]
        print(kind, sw, ' '.join(f'{x:.1f}' for x in r), 'us/roundtrip')
print('inline', ' '.join(f'{asyncio.run(inline()):.1f}' for _ in range(3)))
