"""Benchmark: what the simulated Kubernetes API server costs a simulation that uses it.

Measures, in this process (as the simulator would use it): the first `start()` (importing
trustme and the server's modules, making the CA, forking, serving), a later `start()`, the
latency of JAX's own request (`list_namespaced_pod` by `status.podIP`, through the real
`kubernetes` client on a kept-alive connection) and of the same request on a new TLS connection
each time, `publish()` of a new attempt, and `close()`. Medians of --runs.

    python benchmarks/apiserver.py [--runs 50] [--pods 64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout: the tests are a package there
from tests.sim.apiserver.test_server import BINDING, JOB, NS, ROLE, SERVICE, TOKENS, kube, pod  # noqa: E402


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--pods", type=int, default=64)
    args = parser.parse_args()
    objects = [JOB, SERVICE, ROLE, BINDING, *(pod(i) for i in range(args.pods))]
    folder = Path(tempfile.mkdtemp())

    began = time.perf_counter()
    from jaxinfra_sim.apiserver.server import ApiServer  # cold: the module and, in start(), trustme

    first = ApiServer("127.0.0.1", TOKENS, folder / "log")
    first.start(objects)
    cold = time.perf_counter() - began
    first.close()

    starts, closes, publishes, kept, fresh = [], [], [], [], []
    for _ in range(max(3, args.runs // 10)):
        t = time.perf_counter()
        api = ApiServer("127.0.0.1", TOKENS, folder / "log")
        api.start(objects)
        starts.append(time.perf_counter() - t)
        (folder / "ca.crt").write_bytes(api.ca_pem)
        t = time.perf_counter()
        api.publish(objects)
        publishes.append(time.perf_counter() - t)
        from kubernetes import client

        core = client.CoreV1Api(kube(api))
        core.list_namespaced_pod(NS, field_selector="status.podIP=127.0.0.11")
        for _ in range(args.runs):
            t = time.perf_counter()
            [found] = core.list_namespaced_pod(NS, field_selector="status.podIP=127.0.0.11").items
            kept.append(time.perf_counter() - t)
            t = time.perf_counter()
            client.CoreV1Api(kube(api)).list_namespaced_pod(NS, field_selector="status.podIP=127.0.0.11")
            fresh.append(time.perf_counter() - t)
        t = time.perf_counter()
        api.close()
        closes.append(time.perf_counter() - t)
    print(f"objects served: {len(objects)} ({args.pods} pods)")
    print(f"first start() incl. imports: {ms(cold)}")
    print(f"start() to serving:          {ms(statistics.median(starts))}")
    print(f"publish() (new attempt):     {ms(statistics.median(publishes))}")
    print(f"JAX's pod lookup, kept-alive connection: {ms(statistics.median(kept))}")
    print(f"JAX's pod lookup, new client + TLS:      {ms(statistics.median(fresh))}")
    print(f"close() (kill, reap):        {ms(statistics.median(closes))}")


if __name__ == "__main__":
    main()
