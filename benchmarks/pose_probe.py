"""How precisely can the VLA's image encoder locate the objects a push needs?

Not part of `make bench` (it needs a recorded push dataset): a probe for choosing cameras and
encoders (docs/vla.md, 'The table camera'). The VLA's image encoder (policies/diffusion/model.py
ImageEncoder: the stem, three stages, spatial-softmax keypoints) reads one camera's image,
a 256-wide head reads its keypoints and the joint state, and both are trained, alone, to
regress the green cube's and the white square's positions on the table (from
observation.environment_state) on all but the last ``--val-episodes`` episodes, with the
policy's random-shift augmentation. Prints the median and 90th-percentile horizontal error
(mm) on the held-out episodes as one JSON line.

    python benchmarks/pose_probe.py datasets/pusht300 table
    python benchmarks/pose_probe.py datasets/push300_dart front --channels 8 16 32
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

# the multi-task scene's environment_state: 7 numbers (position, quaternion) per object, in
# the task's order red_cube, blue_cube, green_cube, pad, square (sim/tasks/multitask.py)
GREEN_XY = slice(14, 16)
SQUARE_XY = slice(28, 30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dataset")
    p.add_argument("camera", help="a camera of the dataset, e.g. table, front, wrist")
    p.add_argument("--channels", type=int, nargs="+", default=[8, 16, 32])
    p.add_argument("--keypoints", type=int, default=32)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--val-episodes", type=int, default=40)
    a = p.parse_args()

    import torch

    from tether.core.data.lerobot import LeRobotReader
    from tether.policies.diffusion.config import DiffusionModelConfig
    from tether.policies.diffusion.dataset import load_windows
    from tether.policies.diffusion.model import ImageEncoder
    from tether.policies.diffusion.trainer import _shift_images

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = DiffusionModelConfig(obs_keys=["state", f"images/{a.camera}"], obs_horizon=1)
    ds = load_windows(a.dataset, cfg, extra_keys=("env_state",))
    img, state, env = ds.obs[f"images/{a.camera}"], ds.obs["state"], ds.obs["env_state"]
    target = np.concatenate([env[:, GREEN_XY], env[:, SQUARE_XY]], 1)
    lengths = [int(e["length"]) for e in LeRobotReader(a.dataset).episodes]
    split = int(np.sum(lengths[: -a.val_episodes]))  # frames are back to back, in order
    train, val = np.arange(split), np.arange(split, len(img))
    mu, sd = target[train].mean(0), target[train].std(0)
    smu, ssd = state[train].mean(0), state[train].std(0) + 1e-6
    enc = ImageEncoder(img.shape[1], img.shape[2], a.channels, a.keypoints)
    head = torch.nn.Sequential(
        torch.nn.Linear(enc.out_dim + state.shape[1], 256), torch.nn.SiLU(), torch.nn.Linear(256, 4)
    )
    opt = torch.optim.AdamW([*enc.parameters(), *head.parameters()], 1e-3, weight_decay=1e-6)
    rng = np.random.default_rng(0)

    def predict(idx: np.ndarray, shift: bool) -> torch.Tensor:
        x = img[idx][:, None]
        x = _shift_images(x, 4, rng) if shift else x
        f = enc(torch.from_numpy(np.ascontiguousarray(x[:, 0])))
        s = torch.from_numpy(((state[idx] - smu) / ssd).astype(np.float32))
        return head(torch.cat([f, s], -1))

    t0 = time.monotonic()
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = 1e-3 * 0.5 * (1 + np.cos(np.pi * step / a.steps))
        idx = rng.choice(train, 64)
        y = torch.from_numpy(((target[idx] - mu) / sd).astype(np.float32))
        loss = torch.nn.functional.mse_loss(predict(idx, True), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    enc.eval()
    with torch.no_grad():
        pred = np.concatenate(
            [predict(val[i : i + 256], False).numpy() for i in range(0, len(val), 256)]
        )
    err = np.abs(pred * sd + mu - target[val])
    cube, square = (np.linalg.norm(err[:, s], axis=1) * 1e3 for s in (slice(0, 2), slice(2, 4)))
    print(
        json.dumps(
            {
                "dataset": a.dataset,
                "camera": a.camera,
                "channels": a.channels,
                "keypoints": a.keypoints,
                "steps": a.steps,
                "train_s": round(time.monotonic() - t0),
                "val_frames": len(val),
                "cube_mm": {
                    "median": round(float(np.median(cube)), 1),
                    "p90": round(float(np.percentile(cube, 90)), 1),
                },
                "square_mm": {
                    "median": round(float(np.median(square)), 1),
                    "p90": round(float(np.percentile(square, 90)), 1),
                },
            }
        )
    )


if __name__ == "__main__":
    main()
