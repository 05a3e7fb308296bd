"""benchmarks/treduce.py's parts that run without a GPU: its timing loop driven by a stand-in for
torch.cuda (the held-stream figure counted only where the hold outlasted the issuing), and its
report and target verdicts on the first 4-GPU lease's points (every target names its series and
figure; the GPU-time figure judged apart)."""
import importlib.util
import json
import os
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("treduce_bench", os.path.join(ROOT, "benchmarks", "treduce.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeCuda:
    """Streams as clocks: each call adds `call_us` of GPU work; a spin holds the stream for its
    cycles (1000 per us); the host's issuing takes `issue_us` per call of the fake's own time."""

    def __init__(self, call_us, issue_us):
        self.call_us, self.issue_us = call_us, issue_us
        self.gpu = 0.0   # when the stream is free, in us
        self.host = 0.0  # the host's clock, in us
        outer = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self, stream=None):
                outer.gpu = max(outer.gpu, outer.host)
                self.at = outer.gpu

            def query(self):
                return self.at <= outer.host

            def synchronize(self):
                outer.host = max(outer.host, self.at)

            def elapsed_time(self, other):
                return (other.at - self.at) / 1e3  # ms

        class Device:
            def __init__(self, d):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *a):
                return False

        self.Event, self.device = Event, Device

    def call(self):
        self.host += self.issue_us
        self.gpu = max(self.gpu, self.host) + self.call_us

    def _sleep(self, cycles):
        self.gpu = max(self.gpu, self.host) + cycles / 1000

    def current_stream(self, device=None):
        return None

    def synchronize(self, device=None):
        self.host = max(self.host, self.gpu)


def test_the_held_stream_figure_is_the_gpu_time_and_back_to_back_the_larger_of_host_and_gpu(bench, monkeypatch):
    cuda = FakeCuda(call_us=4.0, issue_us=15.0)
    torch = types.SimpleNamespace(cuda=cuda)
    monkeypatch.setattr(bench.time, "perf_counter", lambda: cuda.host / 1e6)
    point = bench.timed(torch, cuda.call, 4096, 0, [0, 1])
    assert point["latency_us"] == pytest.approx(15.0, rel=0.01)  # host-bound back to back
    assert point["gpu_us"] == pytest.approx(4.0, rel=0.01) and point["host_us"] == pytest.approx(15.0, rel=0.01)
    assert len(point["gpu_batch_us"]) == bench.GPU_BATCHES


def test_batches_whose_issuing_outlasted_the_hold_are_not_counted(bench, monkeypatch):
    cuda = FakeCuda(call_us=4.0, issue_us=15.0)
    torch = types.SimpleNamespace(cuda=cuda)
    monkeypatch.setattr(bench.time, "perf_counter", lambda: cuda.host / 1e6)
    # a host hint far too small: the first hold ends before the calls are issued
    out = bench.gpu_timed(torch, cuda.call, 200, 0, [0], lambda: cuda.synchronize(), host_hint_us=0.0)
    assert out["gpu_us"] == pytest.approx(4.0, rel=0.01)
    assert len(out["gpu_batch_us"]) < bench.GPU_BATCHES  # the first batch was dropped, the hold grew


def lease_points():
    """The first lease's points, with GPU times where the fake's model gives them (auto fast)."""
    with open(os.path.join(ROOT, "tests", "data", "treduce_lease1.json")) as f:
        points = json.load(f)
    for p in points:
        if "latency_us" in p:
            p.setdefault("gpu_us", p["latency_us"] / 2)
            p.setdefault("host_us", p["latency_us"])
    return points


def test_the_report_and_targets_name_their_series_and_figure(bench, capsys):
    points = lease_points()
    sizes = sorted({p["bytes"] for p in points})
    bench.print_table(points, 4, sizes, (64, 256), True, ["cuda_ipc"])
    out = capsys.readouterr().out
    assert "GPU us per call with the host's issuing hidden" in out and "auto 16 MiB: chain; model" in out
    verdicts = bench.check_targets(points, sizes, [2, 4])
    latency = [v for v in verdicts if v["target"].startswith("latency <= 10 us")]
    assert {(v["gpus"], v["figure"]) for v in latency} == {(2, "back to back"), (2, "GPU time"), (4, "back to back"),
                                                           (4, "GPU time")}
    back_to_back = {v["gpus"]: v["verdict"] for v in latency if v["figure"] == "back to back"}
    assert back_to_back[4].startswith("missed at 4 KiB (root_pull: 16.1 us)"), back_to_back
    # 4 GPUs: from 16 MiB auto ran the first chain, slower than scatter_gather; at 1 MiB it ran
    # scatter_gather, the fastest forced algorithm there (35.8 us beside its forced run's 23.8: one kernel)
    (best,) = [v for v in verdicts if v["target"].startswith("auto within 5%") and v["gpus"] == 4
               and v["figure"] == "back to back"]
    assert best["verdict"].startswith("missed at 16 MiB (chain: 227.8 us against 102.8)"), best
    assert "1 MiB" not in best["verdict"], best
