"""A decoupled model: N responses per request (TEXT + " #i"), DELAY_MS apart, like an LLM streaming
tokens. Request parameters make it misbehave: `fail_at` (an error response in the stream), `raise_at`
(an exception after some responses), `return_list` (returns responses, which decoupled models must not)."""
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        if not pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"])):
            raise pb_utils.TritonModelException("streamer must be decoupled")

    def execute(self, requests):
        for request in requests:
            params = json.loads(request.parameters())
            if params.get("return_list"):
                return [pb_utils.InferenceResponse([]) for _ in requests]
            sender = request.get_response_sender()
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()[0]
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS")
            delay_s = int(delay.as_numpy()[0]) / 1000.0 if delay is not None else 0.0
            if n < 0:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("N must not be negative")),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            for i in range(n):
                if i and delay_s:
                    time.sleep(delay_s)
                if params.get("raise_at") == i:
                    raise RuntimeError("streamer failed at %d" % i)
                if params.get("fail_at") == i:
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("failed at %d" % i)))
                    continue
                sender.send(pb_utils.InferenceResponse([
                    pb_utils.Tensor("TOKEN", np.array([text + b" #%d" % i], dtype=np.object_)),
                    pb_utils.Tensor("INDEX", np.array([i], dtype=np.int32)),
                ]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
