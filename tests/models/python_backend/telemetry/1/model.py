"""Custom metrics (a counter, a gauge and a histogram) and server log lines from a model.

The MetricFamily objects are kept on `self`: Triton deletes a family (and fails its metrics) as soon as
the Python object is garbage-collected."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.requests_family = pb_utils.MetricFamily(name="telemetry_requests_total", description="requests seen by the model",
                                                     kind=pb_utils.MetricFamily.COUNTER)
        self.last_family = pb_utils.MetricFamily(name="telemetry_last_value", description="last input value",
                                                 kind=pb_utils.MetricFamily.GAUGE)
        self.values_family = pb_utils.MetricFamily(name="telemetry_values", description="input values",
                                                   kind=pb_utils.MetricFamily.HISTOGRAM)
        self.requests = self.requests_family.Metric(labels={"model": args["model_name"], "version": args["model_version"]})
        self.last = self.last_family.Metric(labels={"kind": "input"})
        self.values = self.values_family.Metric(labels={"kind": "input"}, buckets=[1.0, 10.0])
        pb_utils.Logger.log_info("telemetry initialized")

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            self.requests.increment(1)
            self.last.set(float(x[0]))
            self.values.observe(float(x[0]))
            pb_utils.Logger.log_info("info from model x=%s" % x[0])
            pb_utils.Logger.log_warn("warning from model")
            pb_utils.Logger.log_error("error from model")
            pb_utils.Logger.log_verbose("verbose from model")
            pb_utils.Logger.log("plain log call", pb_utils.Logger.INFO)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return responses
