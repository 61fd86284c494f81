#!/usr/bin/env python
"""The grpc.aio ceiling: a bare grpc.aio server (on uvloop, as triton-mini's) whose ModelInfer / ModelStreamInfer
echo INPUT0 as OUTPUT0 with the same protobufs, and nothing else: no repository, no validation, no scheduler.

    python bench/grpc_bare.py PORT                 # bench/grpc_run.py --ceiling starts it pinned like the servers

Whatever triton-mini does on top of grpc.aio cannot make it faster than this.
"""
import asyncio, sys
import grpc
from grpc import aio
from tritonclient.grpc import service_pb2 as pb

def answer(request) -> pb.ModelInferResponse:
    out = pb.ModelInferResponse(model_name=request.model_name, model_version='1', id=request.id)
    t = request.inputs[0]
    out.outputs.add(name='OUTPUT0', datatype=t.datatype, shape=t.shape)
    out.raw_output_contents.append(request.raw_input_contents[0])
    return out

async def infer(request, context): return answer(request)

async def stream(requests, context):
    async for r in requests: yield pb.ModelStreamInferResponse(infer_response=answer(r))

async def main(port:int):
    server = aio.server()
    handlers = {'ModelInfer': grpc.unary_unary_rpc_method_handler(infer, request_deserializer=pb.ModelInferRequest.FromString,
                                                                   response_serializer=pb.ModelInferResponse.SerializeToString),
                'ModelStreamInfer': grpc.stream_stream_rpc_method_handler(stream, request_deserializer=pb.ModelInferRequest.FromString,
                                                                          response_serializer=pb.ModelStreamInferResponse.SerializeToString)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler('inference.GRPCInferenceService', handlers),))
    server.add_insecure_port(f'127.0.0.1:{port}')
    await server.start()
    await server.wait_for_termination()

if __name__ == '__main__':
    try: import uvloop; uvloop.run(main(int(sys.argv[1])))
    except ImportError: asyncio.run(main(int(sys.argv[1])))
