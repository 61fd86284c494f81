"""Business Logic Scripting: a model that calls other models of the same server (add_sub, scaled,
streamer, errors) with exec(), async_exec() and the decoupled iterator. MODE picks the scenario."""
import asyncio
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def add_sub_request(a, outputs, drop_input1=False, version=-1):
    inputs = [pb_utils.Tensor("INPUT0", a[None, :])]
    if not drop_input1:
        inputs.append(pb_utils.Tensor("INPUT1", np.ones((1, 4), dtype=np.float32)))
    return pb_utils.InferenceRequest(model_name="add_sub", model_version=version, inputs=inputs,
                                     requested_output_names=outputs)


def streamer_request(text, n, delay_ms=0, parameters=None):
    inputs = [pb_utils.Tensor("TEXT", np.array([text], dtype=np.object_)),
              pb_utils.Tensor("N", np.array([n], dtype=np.int32)),
              pb_utils.Tensor("DELAY_MS", np.array([delay_ms], dtype=np.int32))]
    return pb_utils.InferenceRequest(model_name="streamer", inputs=inputs, requested_output_names=["TOKEN"],
                                     parameters=parameters or {})


def error_text(response):
    err = response.error()
    return ("%s | %s" % (err.message(), err.code())).encode()


def tokens(responses, start):
    "What a decoupled BLS iterator yields: tokens, errors, and the final empty response; with arrival times."
    msgs, times = [], []
    for response in responses:
        times.append((time.monotonic() - start) * 1000.0)
        if response.has_error():
            msgs.append(b"ERR " + error_text(response))
            continue
        token = pb_utils.get_output_tensor_by_name(response, "TOKEN")
        msgs.append(token.as_numpy()[0] if token is not None else b"<final-empty>")
    return msgs, times


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            total, msgs, times = np.zeros([0], dtype=np.float32), [], []
            if mode == 0:  # blocking exec
                response = add_sub_request(a, ["OUTPUT0"]).exec()
                out = pb_utils.get_output_tensor_by_name(response, "OUTPUT0").as_numpy()
                total = out.reshape(-1)
                msgs = [json.dumps({"outputs": [t.name() for t in response.output_tensors()], "shape": list(out.shape)}).encode()]
            elif mode == 1:  # two async_exec calls in flight at once
                r0, r1 = await asyncio.gather(add_sub_request(a, ["OUTPUT0"]).async_exec(),
                                              add_sub_request(a, ["OUTPUT1"]).async_exec())
                total = np.concatenate([pb_utils.get_output_tensor_by_name(r0, "OUTPUT0").as_numpy().reshape(-1),
                                        pb_utils.get_output_tensor_by_name(r1, "OUTPUT1").as_numpy().reshape(-1)])
            elif mode == 2:  # unknown model
                response = pb_utils.InferenceRequest(model_name="no_such_model", inputs=[pb_utils.Tensor("INPUT0", a)],
                                                     requested_output_names=["OUTPUT0"]).exec()
                msgs = [error_text(response)]
            elif mode == 3:  # a request the callee rejects
                msgs = [error_text(add_sub_request(a, ["OUTPUT0"], drop_input1=True).exec())]
            elif mode == 4:  # a version that does not exist
                msgs = [error_text(add_sub_request(a, ["OUTPUT0"], version=7).exec())]
            elif mode == 5:  # decoupled callee, blocking iterator
                msgs, times = tokens(streamer_request(b"bls", 3).exec(decoupled=True), time.monotonic())
            elif mode == 6:  # decoupled callee through async_exec, with an error response in the stream
                start = time.monotonic()
                msgs, times = tokens(await streamer_request(b"async", 3, parameters={"fail_at": 1}).async_exec(decoupled=True), start)
            elif mode == 7:  # decoupled callee streaming slowly: are responses handed over as they come?
                start = time.monotonic()
                msgs, times = tokens(streamer_request(b"slow", 3, delay_ms=200).exec(decoupled=True), start)
            elif mode == 8:  # no requested outputs: all of them
                response = add_sub_request(a, []).exec()
                msgs = [t.name().encode() for t in response.output_tensors()]
            elif mode == 9:  # request parameters reach the callee
                x = pb_utils.Tensor("X", a[None, :])
                response = pb_utils.InferenceRequest(model_name="scaled", inputs=[x], requested_output_names=["Y"],
                                                     parameters={"offset": 10}).exec()
                total = pb_utils.get_output_tensor_by_name(response, "Y").as_numpy().reshape(-1)
            elif mode == 10:  # the callee fails: an error response, then an exception
                for callee_mode in (9, 12, 13, 1):
                    r = pb_utils.InferenceRequest(model_name="errors", requested_output_names=["OUT"],
                                                  inputs=[pb_utils.Tensor("MODE", np.array([callee_mode], dtype=np.int32))]).exec()
                    msgs.append(error_text(r))
            elif mode == 11:  # decoupled callee: an error response, through the blocking iterator
                msgs, times = tokens(streamer_request(b"e", 3, parameters={"fail_at": 1}).exec(decoupled=True), time.monotonic())
            elif mode == 12:  # decoupled callee raises after one response
                msgs, times = tokens(streamer_request(b"r", 3, parameters={"raise_at": 1}).exec(decoupled=True), time.monotonic())
            elif mode == 13:  # decoupled callee answers with one error response carrying the final flag
                msgs, times = tokens(streamer_request(b"n", -1).exec(decoupled=True), time.monotonic())
            elif mode == 14:  # decoupled callee called without decoupled=True
                response = streamer_request(b"one", 2).exec()
                msgs = [error_text(response)] if response.has_error() else [t.as_numpy()[0] for t in response.output_tensors()]
            elif mode == 15:  # a model that is not decoupled, through the decoupled iterator
                for response in add_sub_request(a, ["OUTPUT0"]).exec(decoupled=True):
                    msgs.append(b",".join(t.name().encode() for t in response.output_tensors()) or b"<final-empty>")
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SUM", total.astype(np.float32)),
                pb_utils.Tensor("MSG", np.array(msgs, dtype=np.object_)),
                pb_utils.Tensor("TIMES", np.array(times, dtype=np.float32)),
            ]))
        return responses
