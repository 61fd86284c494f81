"""Experiment (bench/results/2026-12-06-stub-wakeups.md): the stub's `work` channel as one pipe per direction instead
of one socketpair used both ways. On PYTHONPATH, this runs in the server, the fork server and every stub: after the
usual start-up handshake on the socketpair, the server hands the stub two pipes (`send_fds`), and both sides read and
write `work` through them. Only with TRITON_MINI_PIPE_WORK=pipe (or =socket: a socketpair per direction)."""
import os
KIND = os.environ.get('TRITON_MINI_PIPE_WORK', '0')   # 'pipe': os.pipe() each way; 'socket': a socketpair each way
if KIND in ('pipe', 'socket'):
    import socket
    from triton_mini import stub_process as sp

    class Pipes:
        "What Channel needs of a socket, over a read pipe and a write pipe."
        def __init__(self, r:int, w:int, sock): self.r, self.w, self.sock = r, w, sock
        def recv_into(self, buf): return os.readv(self.r, [buf])
        def sendmsg(self, parts): return os.writev(self.w, parts)
        def sendall(self, data):
            mv = memoryview(data)
            while mv: mv = mv[os.write(self.w, mv):]
        def fileno(self): return self.r
        def settimeout(self, t): pass
        def shutdown(self, how):
            try: self.sock.shutdown(how)
            except OSError: pass
            if how in (socket.SHUT_WR, socket.SHUT_RDWR): self._close_w()
        def _close_w(self):
            if self.w >= 0:
                try: os.close(self.w)
                except OSError: pass
                self.w = -1
        def close(self):
            self._close_w()
            if self.r >= 0:
                try: os.close(self.r)
                except OSError: pass
                self.r = -1
            self.sock.close()

    _offer, _accept = sp.offer_regions, sp.accept_regions

    def offer_regions(work, side, timeout=60.0):
        work, side = _offer(work, side, timeout)
        if KIND == 'pipe': to_r, to_w = os.pipe(); from_r, from_w = os.pipe()
        else:
            pairs = [socket.socketpair() for _ in range(2)]
            (to_r, to_w), (from_r, from_w) = [(a.detach(), b.detach()) for a, b in pairs]
        try: socket.send_fds(work.sock, [b'p'], [to_r, from_w])
        finally: os.close(to_r); os.close(from_w)
        work.sock = Pipes(from_r, to_w, work.sock)
        return work, side

    def accept_regions(work, side):
        work, side = _accept(work, side)
        msg, fds, _, _ = socket.recv_fds(work.sock, 1, 2)
        for fd in fds: os.set_inheritable(fd, False)
        work.sock = Pipes(fds[0], fds[1], work.sock)
        return work, side

    sp.offer_regions, sp.accept_regions = offer_regions, accept_regions
