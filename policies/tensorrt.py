"""`tether export --tensorrt`: a serialized TensorRT engine built from an exported model's
ONNX graph on this machine's GPU, checked against onnxruntime on the CPU, its build settings
recorded in model.json (docs/isaac_sim.md, "TensorRT").

Written against the TensorRT 10 Python API (``tensorrt``: Builder, OnnxParser,
IBuilderConfig, Runtime, ``execute_async_v3``) and CUDA's runtime API from ``cuda-python``
for the device buffers of the parity run. Neither can run without an NVIDIA GPU, so this
module has not run on the machines Tether is developed on; every missing piece is one
TetherError naming it. Torch-free (it runs on the target).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import TetherError

ENGINE_FILE = "model.engine"
# the largest |TensorRT - onnxruntime CPU| in an action (rad, m, ...) the export accepts:
# fp16 kernels round every layer to 11 bits; fp32 kernels differ in summation order only
PARITY_TOL = {True: 5e-2, False: 1e-3}


def import_tensorrt() -> Any:
    try:
        import tensorrt as trt
    except ImportError:
        raise TetherError(
            "TensorRT is not installed here: `pip install tensorrt-cu12` (TensorRT 10) on a "
            "machine with an NVIDIA GPU and a CUDA 12 driver; or serve the ONNX model with "
            "`--provider tensorrt` (onnxruntime-gpu's TensorRT provider builds and caches "
            "the engine itself)"
        ) from None
    return trt


def import_cudart() -> Any:
    """CUDA's runtime API from cuda-python (12.x moved it to cuda.bindings.runtime)."""
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        try:
            from cuda import cudart  # type: ignore[no-redef]
        except ImportError:
            raise TetherError(
                "the parity check of a TensorRT engine needs cuda-python for its GPU buffers: "
                "`pip install cuda-python`"
            ) from None
    return cudart


def example_feeds(contract: dict[str, Any], seed: int = 0) -> dict[str, np.ndarray]:
    """One input of each graph input's shape and dtype from model.json: images as random
    uint8 pixels, every other input standard normal (the noise input too)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for spec in contract["inputs"]:
        shape = [int(s) for s in spec["shape"]]
        dtype = np.dtype(spec.get("dtype", "float32"))
        if dtype == np.uint8:
            out[spec["name"]] = rng.integers(0, 256, shape, dtype=np.uint8)
        else:
            out[spec["name"]] = rng.standard_normal(shape).astype(dtype)
    return out


def build_engine(onnx_path: Path, fp16: bool = True) -> bytes:
    """A serialized engine for ``onnx_path`` (fixed shapes: the exported graphs have no
    dynamic axes, model.json gives them); fp16 kernels where the GPU has fast fp16."""
    trt = import_tensorrt()
    logger = trt.Logger(trt.Logger.WARNING)
    try:
        builder = trt.Builder(logger)
    except Exception as exc:  # no CUDA device or driver
        raise TetherError(f"TensorRT could not start ({exc}): is an NVIDIA GPU visible?") from None
    network = builder.create_network(0)  # TensorRT 10: explicit batch is the only mode
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_path.read_bytes()):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise TetherError(f"TensorRT could not parse {onnx_path}: {errors}")
    config = builder.create_builder_config()
    if fp16 and builder.platform_has_fast_fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    engine = builder.build_serialized_network(network, config)
    if engine is None:
        raise TetherError(f"TensorRT failed to build an engine from {onnx_path}")
    return bytes(engine)


def _check(result: Any, what: str) -> Any:
    """cuda-python calls return (error, *values): raise on an error, return the values."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise TetherError(f"CUDA {what} failed: {err}")
    return values[0] if len(values) == 1 else values


def run_engine(engine: bytes, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a serialized engine once on ``feeds`` (by tensor name); every output, by name."""
    trt = import_tensorrt()
    cudart = import_cudart()
    runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
    eng = runtime.deserialize_cuda_engine(engine)
    if eng is None:
        raise TetherError("TensorRT could not load the engine it built")
    context = eng.create_execution_context()
    stream = _check(cudart.cudaStreamCreate(), "cudaStreamCreate")
    buffers: list[Any] = []
    outputs: dict[str, np.ndarray] = {}
    h2d = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
    d2h = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
    try:
        for i in range(eng.num_io_tensors):
            name = eng.get_tensor_name(i)
            shape = tuple(context.get_tensor_shape(name))
            dtype = np.dtype(trt.nptype(eng.get_tensor_dtype(name)))
            if eng.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                host = np.ascontiguousarray(feeds[name], dtype=dtype).reshape(shape)
            else:
                host = np.empty(shape, dtype)
                outputs[name] = host
            ptr = _check(cudart.cudaMalloc(max(host.nbytes, 1)), "cudaMalloc")
            buffers.append(ptr)
            if name not in outputs:
                _check(cudart.cudaMemcpy(ptr, host.ctypes.data, host.nbytes, h2d), "copy in")
            context.set_tensor_address(name, int(ptr))
        if not context.execute_async_v3(stream):
            raise TetherError("TensorRT could not run the engine")
        _check(cudart.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
        for i, name in enumerate(eng.get_tensor_name(k) for k in range(eng.num_io_tensors)):
            if name in outputs:
                host = outputs[name]
                _check(cudart.cudaMemcpy(host.ctypes.data, buffers[i], host.nbytes, d2h), "copy")
    finally:
        for ptr in buffers:
            cudart.cudaFree(ptr)
        cudart.cudaStreamDestroy(stream)
    return outputs


def export_tensorrt(onnx_path: Path, fp16: bool = True) -> Path:
    """Build ``model.engine`` beside ``onnx_path``, run it against onnxruntime (CPU) on one
    example input, and record the build in model.json (``tensorrt``: engine, fp16,
    TensorRT version, GPU, parity). A parity error over PARITY_TOL is a TetherError (the
    engine stays on disk, model.json does not name it)."""
    from tether.policies.runtime import contract_path, open_session, read_contract

    contract = read_contract(onnx_path)
    trt = import_tensorrt()
    t0 = time.monotonic()
    engine = build_engine(onnx_path, fp16)
    build_s = time.monotonic() - t0
    out = onnx_path.parent / ENGINE_FILE
    out.write_bytes(engine)
    feeds = example_feeds(contract)
    session, _ = open_session(onnx_path)
    name = contract["outputs"][0]["name"]
    ref = np.asarray(session.run([name], feeds)[0])
    got = run_engine(engine, feeds)[name].reshape(ref.shape)
    err = float(np.abs(got.astype(np.float64) - ref).max())
    tol = PARITY_TOL[bool(fp16)]
    print(f"{out}: built in {build_s:.1f} s, TensorRT vs onnxruntime CPU max abs error {err:.2e}")
    if not np.isfinite(err) or err > tol:
        hint = " (try --no-fp16)" if fp16 else ""
        raise TetherError(f"{out}: TensorRT differs from onnxruntime by {err:.2e} (> {tol}){hint}")
    path = contract_path(onnx_path)
    meta = json.loads(path.read_text())
    meta["tensorrt"] = {
        "engine": ENGINE_FILE,
        "fp16": bool(fp16),
        "tensorrt_version": str(trt.__version__),
        "gpu": _gpu_name(),
        "build_s": round(build_s, 1),
        "parity_max_abs_error": err,
        "built": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    path.write_text(json.dumps(meta, indent=2) + "\n")
    return out


def _gpu_name() -> str:
    try:
        cudart = import_cudart()
        props = _check(cudart.cudaGetDeviceProperties(0), "cudaGetDeviceProperties")
        name = props.name
        return (name.decode() if isinstance(name, bytes) else str(name)).rstrip("\x00")
    except Exception:  # the name is a record, not a requirement
        return "unknown"
