"""The policy server says where an exported graph runs: once in its log, and on
episode_status (event "runtime", latched; again at each reset), with a fallback the user
allowed spelled out. The shipped state lift model, in-process nodes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402


def _runtime_events(repo, overrides: list[str], reset: bool = False) -> list[dict]:
    cfg = load_config(
        repo / "configs/experiments/panda_lift_diffusion.yaml", ["sim.cameras=[]", *overrides]
    )
    with ros_context() as ctx:
        server = PolicyServer(cfg, context=ctx)
        probe = Node("probe", context=ctx)
        events: list[dict] = []
        probe.create_subscription(  # joins late: the latched event still arrives
            String, itf.EPISODE_STATUS, lambda m: events.append(json.loads(m.data)), itf.EVENT_QOS
        )
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(server)
        ex.add_node(probe)
        try:
            assert spin_until(ex, lambda: any(e["event"] == "runtime" for e in events), 10)
            if reset:
                cli = probe.create_client(Trigger, "policy_server/reset")
                fut = cli.call_async(Trigger.Request()) if cli.wait_for_service(5.0) else None
                assert fut is not None and spin_until(ex, fut.done, 10)
                assert spin_until(ex, lambda: len(events) >= 2, 10)
        finally:
            server.destroy_node()
            probe.destroy_node()
    return [e for e in events if e["event"] == "runtime"]


def test_the_policy_server_reports_the_cpu_provider_and_again_at_reset(repo):
    events = _runtime_events(repo, [], reset=True)
    assert len(events) == 2
    for e in events:
        assert e["provider"] == "cpu" and e["requested"] == "cpu" and "fallback" not in e
        assert e["node"] == "policy_server"


def test_an_allowed_fallback_is_reported_with_its_reason(repo):
    import onnxruntime as ort

    if "TensorrtExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has TensorRT")
    (e,) = _runtime_events(repo, ["runtime.provider=tensorrt", "runtime.fallback=true"])
    assert e["requested"] == "tensorrt" and e["provider"] in ("cuda", "cpu")
    assert "TensorrtExecutionProvider" in e["fallback"]
