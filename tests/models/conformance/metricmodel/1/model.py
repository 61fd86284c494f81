import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Counts requests, remembers the last X, and records X in a histogram."""

    def initialize(self, args):
        self.requests_family = pb_utils.MetricFamily(
            name="my_requests_total", description="my counter", kind=pb_utils.MetricFamily.COUNTER)
        self.last_x_family = pb_utils.MetricFamily(
            name="my_gauge", description="my gauge", kind=pb_utils.MetricFamily.GAUGE)
        self.x_family = pb_utils.MetricFamily(
            name="my_hist", description="my histogram", kind=pb_utils.MetricFamily.HISTOGRAM)
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self.requests = self.requests_family.Metric(labels=labels)
        self.last_x = self.last_x_family.Metric(labels={"kind": "x"})
        self.x = self.x_family.Metric(labels={"a": "b"}, buckets=[0.1, 1.0, 10.0])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            self.requests.increment(1)
            self.last_x.set(float(x[0]))
            self.x.observe(float(x[0]))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
        return responses
