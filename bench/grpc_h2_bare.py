#!/usr/bin/env python
"""The own-transport ceiling: gRPC over a minimal HTTP/2 frame loop on an asyncio Protocol (uvloop), answering
ModelInfer / ModelStreamInfer by echoing INPUT0 as OUTPUT0 with the same protobufs as bench/grpc_bare.py.

    python bench/grpc_h2_bare.py PORT            # own frame loop + hpack's decoder (the default)
    python bench/grpc_h2_bare.py PORT --h2       # the h2 package's state machine instead

What this measures: whether HTTP/2 framing + HPACK in Python on our own protocol beats grpc.aio's C core for small
unary calls. Answers are stateless HPACK (literals without indexing, precomputed bytes), so only decoding needs the
per-connection dynamic table (hpack.Decoder).
"""
import asyncio, struct, sys
from tritonclient.grpc import service_pb2 as pb

def answer(request) -> pb.ModelInferResponse:
    out = pb.ModelInferResponse(model_name=request.model_name, model_version='1', id=request.id)
    t = request.inputs[0]
    out.outputs.add(name='OUTPUT0', datatype=t.datatype, shape=t.shape)
    out.raw_output_contents.append(request.raw_input_contents[0])
    return out

PREFACE = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
DATA, HEADERS, RST, SETTINGS, PING, GOAWAY, WINDOW, CONT = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 1, 1, 4, 8, 0x20
WINDOW_SIZE = 1 << 24

def frame(kind, flags, sid, payload=b''):
    return struct.pack('>I', len(payload))[1:] + bytes((kind, flags)) + struct.pack('>I', sid) + payload

def literal(name:bytes, value:bytes) -> bytes:
    "A stateless HPACK field: literal without indexing, new name, no Huffman (lengths < 127)."
    return b'\x00' + bytes((len(name),)) + name + bytes((len(value),)) + value

RESPONSE_HEADERS = b'\x88' + literal(b'content-type', b'application/grpc')   # 0x88 = static :status 200
TRAILERS_OK = literal(b'grpc-status', b'0')

class H2Echo(asyncio.Protocol):
    def connection_made(self, transport):
        import hpack
        self.t, self.buf, self.preface, self.dec = transport, b'', False, hpack.Decoder()
        self.streams = {}     # stream id -> [path, bytearray body, headers sent]
        self.received = 0     # connection bytes received since the last WINDOW_UPDATE
        self.out = []
        transport.write(frame(SETTINGS, 0, 0, struct.pack('>HI', 3, 1000) + struct.pack('>HI', 4, WINDOW_SIZE))
                        + frame(WINDOW, 0, 0, struct.pack('>I', WINDOW_SIZE - 65535)))

    def data_received(self, data):
        buf = self.buf + data if self.buf else data
        pos = 0
        if not self.preface:
            if len(buf) < 24: self.buf = buf; return
            self.preface, pos = True, 24
        n, out = len(buf), self.out
        while n - pos >= 9:
            length = int.from_bytes(buf[pos:pos + 3], 'big')
            if n - pos - 9 < length: break
            kind, flags = buf[pos + 3], buf[pos + 4]
            sid = int.from_bytes(buf[pos + 5:pos + 9], 'big') & 0x7fffffff
            payload = buf[pos + 9:pos + 9 + length]
            pos += 9 + length
            if kind == DATA: self.on_data(sid, flags, payload, length)
            elif kind == HEADERS: self.on_headers(sid, flags, payload)
            elif kind == SETTINGS:
                if not flags & ACK: out.append(frame(SETTINGS, ACK, 0))
            elif kind == PING:
                if not flags & ACK: out.append(frame(PING, ACK, 0, payload))
            elif kind == RST: self.streams.pop(sid, None)
            elif kind == GOAWAY: self.t.close()
        self.buf = buf[pos:]
        if out: self.t.write(b''.join(out)); out.clear()

    def on_headers(self, sid, flags, payload):
        if flags & PADDED: payload = payload[1:len(payload) - payload[0]]
        if flags & PRIO: payload = payload[5:]
        path = None
        for k, v in self.dec.decode(payload, raw=True):
            if k == b':path': path = v
        self.streams[sid] = [path, bytearray(), False]

    def on_data(self, sid, flags, payload, length):
        if flags & PADDED: payload = payload[1:len(payload) - payload[0]]
        self.received += length
        if self.received > WINDOW_SIZE // 2:
            self.out.append(frame(WINDOW, 0, 0, struct.pack('>I', self.received))); self.received = 0
        s = self.streams.get(sid)
        if s is None: return
        body = s[1]; body += payload
        if s[0].endswith(b'/ModelStreamInfer'):
            while len(body) >= 5 and len(body) >= 5 + int.from_bytes(body[1:5], 'big'):
                size = int.from_bytes(body[1:5], 'big')
                msg = pb.ModelStreamInferResponse(infer_response=answer(pb.ModelInferRequest.FromString(bytes(body[5:5 + size]))))
                del body[:5 + size]
                self.send_message(sid, s, msg.SerializeToString())
            if flags & END_STREAM:
                if not s[2]: self.out.append(frame(HEADERS, END_HEADERS, sid, RESPONSE_HEADERS))
                self.out.append(frame(HEADERS, END_HEADERS | END_STREAM, sid, TRAILERS_OK)); del self.streams[sid]
                self.stream_window(length - len(payload) + len(payload), sid)
        elif flags & END_STREAM:
            del self.streams[sid]
            msg = answer(pb.ModelInferRequest.FromString(bytes(body[5:]))).SerializeToString()
            self.send_message(sid, s, msg)
            self.out.append(frame(HEADERS, END_HEADERS | END_STREAM, sid, TRAILERS_OK))

    def stream_window(self, n, sid): pass   # streams end before their 16 MB window is used up in this benchmark

    def send_message(self, sid, s, msg:bytes):
        if not s[2]: self.out.append(frame(HEADERS, END_HEADERS, sid, RESPONSE_HEADERS)); s[2] = True
        self.out.append(frame(DATA, 0, sid, b'\x00' + len(msg).to_bytes(4, 'big') + msg))


# ---- the same with the h2 package's connection state machine
class H2Lib(asyncio.Protocol):
    def connection_made(self, transport):
        import h2.connection, h2.config, h2.events
        self.ev = h2.events
        self.t = transport
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None, validate_inbound_headers=False,
                                                                         validate_outbound_headers=False, normalize_outbound_headers=False))
        self.conn.local_settings.initial_window_size = WINDOW_SIZE
        self.conn.initiate_connection(); self.conn.increment_flow_control_window(WINDOW_SIZE - 65535)
        transport.write(self.conn.data_to_send())
        self.streams = {}

    def data_received(self, data):
        ev, conn = self.ev, self.conn
        for e in conn.receive_data(data):
            if isinstance(e, ev.RequestReceived):
                self.streams[e.stream_id] = [dict(e.headers)[b':path'], bytearray(), False]
            elif isinstance(e, ev.DataReceived):
                s = self.streams.get(e.stream_id)
                conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                if s is None: continue
                s[1] += e.data
                if s[0].endswith(b'/ModelStreamInfer'):
                    body = s[1]
                    while len(body) >= 5 and len(body) >= 5 + int.from_bytes(body[1:5], 'big'):
                        size = int.from_bytes(body[1:5], 'big')
                        msg = pb.ModelStreamInferResponse(infer_response=answer(pb.ModelInferRequest.FromString(bytes(body[5:5 + size])))).SerializeToString()
                        del body[:5 + size]
                        self.send(e.stream_id, s, msg)
            elif isinstance(e, ev.StreamEnded):
                s = self.streams.pop(e.stream_id, None)
                if s is None: continue
                if not s[0].endswith(b'/ModelStreamInfer'):
                    self.send(e.stream_id, s, answer(pb.ModelInferRequest.FromString(bytes(s[1][5:]))).SerializeToString())
                elif not s[2]: conn.send_headers(e.stream_id, [(b':status', b'200'), (b'content-type', b'application/grpc')])
                conn.send_headers(e.stream_id, [(b'grpc-status', b'0')], end_stream=True)
            elif isinstance(e, ev.StreamReset): self.streams.pop(e.stream_id, None)
        self.t.write(conn.data_to_send())

    def send(self, sid, s, msg):
        if not s[2]:
            self.conn.send_headers(sid, [(b':status', b'200'), (b'content-type', b'application/grpc')]); s[2] = True
        self.conn.send_data(sid, b'\x00' + len(msg).to_bytes(4, 'big') + msg)


async def main(port:int, lib:bool):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(H2Lib if lib else H2Echo, '127.0.0.1', port)
    async with server: await server.serve_forever()

if __name__ == '__main__':
    port, lib = int(sys.argv[1]), '--h2' in sys.argv
    try: import uvloop; uvloop.run(main(port, lib))
    except ImportError: asyncio.run(main(port, lib))
