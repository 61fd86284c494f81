#!/usr/bin/env python
"""The HTTP ceiling: uvicorn (uvloop + httptools, as triton-mini runs it) with a bare ASGI app that reads the request
body and answers a precomputed body, and nothing else: no repository, no parsing, no model, no thread hand-off.

    python bench/uvicorn_bare.py --http-port=PORT --answers=DIR   # bench/run.py starts it pinned like the servers

DIR holds `json` (the answer to a JSON request) and, for the binary workload, `binary` and `binary.header_length`
(the answer to an `application/octet-stream` request, with its Inference-Header-Content-Length). Whatever
triton-mini does on top of uvicorn cannot make it faster than this (issue 14's "bare-uvicorn ceiling").
"""
import argparse
from pathlib import Path
import uvicorn

def make_app(answers:Path):
    json_body = (answers / 'json').read_bytes()
    json_head = [(b'content-type', b'application/json'), (b'content-length', str(len(json_body)).encode())]
    binary = answers / 'binary'
    bin_body = binary.read_bytes() if binary.exists() else json_body
    bin_head = ([(b'content-type', b'application/octet-stream'), (b'content-length', str(len(bin_body)).encode()),
                 (b'inference-header-content-length', (answers / 'binary.header_length').read_bytes().strip())]
                if binary.exists() else json_head)

    async def app(scope, receive, send):
        if scope['type'] != 'http': return   # lifespan: nothing to set up
        more, binary_request = True, any(k == b'inference-header-content-length' for k, _ in scope['headers'])
        while more: more = (await receive()).get('more_body', False)   # read (and drop) the whole request body
        if scope['path'].endswith('/ready'): body, head = b'', [(b'content-length', b'0')]
        else: body, head = (bin_body, bin_head) if binary_request else (json_body, json_head)
        await send({'type': 'http.response.start', 'status': 200, 'headers': head})
        await send({'type': 'http.response.body', 'body': body})
    return app

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--http-port', type=int, required=True)
    p.add_argument('--answers', type=Path, required=True)
    args, _ = p.parse_known_args()   # the other server flags bench/run.py passes are ignored
    uvicorn.run(make_app(args.answers), host='127.0.0.1', port=args.http_port, loop='uvloop', http='httptools',
                lifespan='off', access_log=False, log_level='warning')
