"Bare grpc.aio server answering ModelInfer with a precomputed response: the ceiling of grpc.aio on one core."
import asyncio, sys, grpc
from grpc import aio
import numpy as np
from tritonclient.grpc import service_pb2 as pb
resp = pb.ModelInferResponse(model_name='identity', model_version='1')
resp.outputs.add(name='OUTPUT0', datatype='FP32', shape=[1, 16])
resp.raw_output_contents.append(np.zeros(16, np.float32).tobytes())
RESP = resp.SerializeToString()
mode = sys.argv[2]
async def infer(request, context): return RESP
async def stream(it, context):
    async for r in it: yield RESP
def infer_sync(request, context): return RESP
async def main():
    s = aio.server(options=[('grpc.so_reuseport', 0)])
    h = {'ModelInfer': (grpc.unary_unary_rpc_method_handler(infer_sync if mode == 'sync' else infer)),
         'ModelStreamInfer': grpc.stream_stream_rpc_method_handler(stream)}
    s.add_generic_rpc_handlers((grpc.method_handlers_generic_handler('inference.GRPCInferenceService', h),))
    s.add_insecure_port(f'127.0.0.1:{sys.argv[1]}')
    await s.start(); await s.wait_for_termination()
if mode == 'uvloop':
    import uvloop; uvloop.run(main())
else: asyncio.run(main())
