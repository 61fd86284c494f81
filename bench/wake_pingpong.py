"""A loop thread and a worker thread handing a future back and forth: microseconds and context switches per round
trip for ways of waking each other (bench/results/2026-12-05-pipe-wake.md). Each case is `INBOUND-OUTBOUND`:

    inbound (loop wakes worker):  cond   threading.Condition.notify      lock  a bare _thread lock released
                                  pipe   os.write to a pipe the worker blocks on in os.read
    outbound (worker wakes loop): cst    loop.call_soon_threadsafe
                                  pipe   os.write to a pipe the loop reads (add_reader)
                                  efd    os.eventfd_write to an eventfd the loop reads (Linux)

    taskset -c 0 python bench/wake_pingpong.py cond-cst lock-cst lock-pipe cond-pipe cond-efd pipe-cst pipe-pipe pipe-efd
"""
import asyncio, collections, os, sys, threading, time
import uvloop

N = 20000

def inbound(kind):
    "(put(item) from the loop, take() -> item in the worker)."
    q = collections.deque()
    if kind == 'cond':
        cond = threading.Condition()
        def put(x):
            with cond: q.append(x); cond.notify()
        def take():
            with cond:
                while not q: cond.wait()
                return q.popleft()
    elif kind == 'lock':
        sem = threading.Lock(); sem.acquire()
        def put(x): q.append(x); sem.release()
        def take(): sem.acquire(); return q.popleft()
    elif kind == 'pipe':
        r, w = os.pipe()
        def put(x): q.append(x); os.write(w, b'.')
        def take(): os.read(r, 1); return q.popleft()
    else: raise SystemExit(f'unknown inbound wake-up {kind!r}')
    return put, take

def outbound(kind, loop):
    "resolve(fut) from the worker: the loop sets its result."
    if kind == 'cst': return lambda fut: loop.call_soon_threadsafe(fut.set_result, 1)
    done = collections.deque()
    if kind == 'pipe':
        r, w = os.pipe(); os.set_blocking(r, False)
        drain, wake = (lambda: os.read(r, 4096)), (lambda: os.write(w, b'.'))
    elif kind == 'efd':
        r = os.eventfd(0, os.EFD_NONBLOCK)
        drain, wake = (lambda: os.eventfd_read(r)), (lambda: os.eventfd_write(r, 1))
    else: raise SystemExit(f'unknown outbound wake-up {kind!r}')
    def on_read():
        try: drain()
        except BlockingIOError: pass
        while done: done.popleft().set_result(1)
    loop.add_reader(r, on_read)
    def resolve(fut): done.append(fut); wake()
    return resolve

def switches() -> int:
    "Context switches of every thread of this process so far."
    total = 0
    for tid in os.listdir('/proc/self/task'):
        for line in open(f'/proc/self/task/{tid}/status'):
            if 'ctxt_switches' in line: total += int(line.split()[1])
    return total

async def round_trips(case:str) -> tuple:
    "(us, context switches) per round trip."
    loop = asyncio.get_running_loop()
    a, b = case.split('-')
    put, take = inbound(a)
    resolve = outbound(b, loop)
    def worker():
        while (fut := take()) is not None: resolve(fut)
    threading.Thread(target=worker, daemon=True).start()
    await asyncio.sleep(0.01)
    cs, t0 = switches(), time.perf_counter()
    for _ in range(N):
        fut = loop.create_future(); put(fut); await fut
    us, per = (time.perf_counter() - t0) / N * 1e6, (switches() - cs) / N
    put(None)
    return us, per

async def inline() -> float:
    "The same future resolved on the loop itself: what a round trip costs without a thread."
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    for _ in range(N):
        fut = loop.create_future(); loop.call_soon(fut.set_result, 1); await fut
    return (time.perf_counter() - t0) / N * 1e6

if __name__ == '__main__':
    uvloop.install()
    for case in sys.argv[1:] or ['cond-cst', 'pipe-cst', 'pipe-efd']:
        runs = [asyncio.run(round_trips(case)) for _ in range(3)]
        print(f'{case:10} ' + '  '.join(f'{us:5.1f} us {cs:4.2f} switches' for us, cs in runs))
    print(f'{"inline":10} ' + '  '.join(f'{asyncio.run(inline()):5.1f} us' for _ in range(3)))
