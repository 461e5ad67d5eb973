"""The inference form of a DiffusionNet: the same function as ``DiffusionNet.sample`` with a
fixed number of DDIM (flow objective: Euler) steps, rearranged so that the traced ONNX graph
has few, cheap nodes.

At batch 1 on one CPU thread onnxruntime spends most of a U-Net's time in per-node overhead
and in slow element-wise kernels, so the rearrangement is about nodes, not FLOPs:

- the diffusion-step half of every FiLM layer is a constant per DDIM step: it is computed
  here once (``film_table``), and the observation half of all FiLM layers is one matrix
  product per call, outside the loop; one Add and one Split give every block's scale and
  shift for every step;
- 1D convolutions run as (1, k) 2D convolutions on (B, C, 1, L) tensors, which
  onnxruntime's CPU convolution handles two to three times faster at these sizes;
- GroupNorm with one group is one LayerNormalization node (per-channel affine expanded over
  the sequence), otherwise reshape + LayerNormalization + reshape + affine (five nodes
  instead of the exporter's InstanceNormalization pattern with its shape arithmetic);
- SiLU exports as x * sigmoid(x), which onnxruntime fuses into one QuickGelu node (about
  1 us on 512 values); Mish as x * tanh(log(1 + e^x)), whose vectorized Exp / Log / Tanh
  kernels beat onnxruntime's scalar Softplus (still some 6-10 us: prefer silu);
- the DDIM coefficients and the final transpose are constants of the graph.
- per-task experts (``model.task_experts``) run as one U-Net of grouped convolutions
  (``GroupedUnet``): the same FLOPs in a quarter of the nodes; on the shipped four-expert
  VLA one chunk takes 0.60 of the time of four separate U-Nets, with the same actions (the
  transposed convolutions block-diagonal: onnx's reference evaluator has no grouped
  ConvTranspose; docs/vla.md).

Networks other than the U-Net sample through ``DiffusionNet.sample`` unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tether.policies.diffusion.model import (
    ConditionalUnet1d,
    CondResBlock1d,
    Conv1dBlock,
    DiffusionNet,
    ExpertDenoiser,
    alphas_cumprod,
    ddim_timesteps,
    flow_timesteps,
    mix_experts,
    step_embedding,
)


def mish(x: Tensor) -> Tensor:
    """Mish without Softplus (e^x overflowing to inf still gives tanh(inf) = 1)."""
    return x * torch.tanh(torch.log(torch.exp(x) + 1.0))


def silu(x: Tensor) -> Tensor:
    return x * torch.sigmoid(x)


def _act(module: nn.Module) -> Callable[[Tensor], Tensor]:
    return silu if isinstance(module, nn.SiLU) else mish


def _conv2d(m: nn.Conv1d) -> nn.Conv2d:
    """A (1, k) Conv2d computing ``m`` on (B, C, 1, L)."""
    out = nn.Conv2d(
        m.in_channels,
        m.out_channels,
        (1, m.kernel_size[0]),
        (1, m.stride[0]),
        (0, int(m.padding[0])),  # type: ignore[index]
        bias=m.bias is not None,
    )
    with torch.no_grad():
        out.weight.copy_(m.weight[:, :, None])
        if m.bias is not None and out.bias is not None:
            out.bias.copy_(m.bias)
    return out


def _conv_t2d(m: nn.ConvTranspose1d) -> nn.ConvTranspose2d:
    out = nn.ConvTranspose2d(
        m.in_channels,
        m.out_channels,
        (1, m.kernel_size[0]),
        (1, m.stride[0]),
        (0, int(m.padding[0])),  # type: ignore[index]
        bias=m.bias is not None,
    )
    with torch.no_grad():
        out.weight.copy_(m.weight[:, :, None])
        if m.bias is not None and out.bias is not None:
            out.bias.copy_(m.bias)
    return out


class Norm2d(nn.Module):
    """GroupNorm of (B, C, 1, L) as LayerNormalization (see the module docstring)."""

    def __init__(self, gn: nn.GroupNorm, length: int) -> None:
        super().__init__()
        self.groups, self.eps = gn.num_groups, gn.eps
        c = gn.num_channels
        self.shape = (c, 1, length)
        self.group_size = c * length // self.groups
        w, b = gn.weight.detach(), gn.bias.detach()
        if self.groups == 1:
            w, b = w[:, None, None].expand(c, 1, length), b[:, None, None].expand(c, 1, length)
        self.weight = nn.Parameter(w.contiguous().clone(), requires_grad=False)
        self.bias = nn.Parameter(b.contiguous().clone(), requires_grad=False)
        # the per-channel affine after a grouped normalization as one BatchNormalization node
        # (mean 0, variance 1, epsilon 0) instead of Mul + Add
        self.register_buffer("zeros", torch.zeros(c))
        self.register_buffer("ones", torch.ones(c))

    def forward(self, x: Tensor) -> Tensor:
        if self.groups == 1:
            return F.layer_norm(x, self.shape, self.weight, self.bias, self.eps)
        y = x.reshape(-1, self.groups, self.group_size)
        y = F.layer_norm(y, (self.group_size,), eps=self.eps).reshape(-1, *self.shape)
        return F.batch_norm(y, self.zeros, self.ones, self.weight, self.bias, False, 0.0, 0.0)


class Block2d(nn.Module):
    """Conv1dBlock (conv, GroupNorm, activation) on (B, C, 1, L)."""

    def __init__(self, blk: Conv1dBlock, length: int) -> None:
        super().__init__()
        conv, gn, act = blk
        self.conv = _conv2d(conv)  # type: ignore[arg-type]
        self.norm = Norm2d(gn, length)  # type: ignore[arg-type]
        self.act = _act(act)

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.norm(self.conv(x)))  # type: ignore[operator]


class ResBlock2d(nn.Module):
    """CondResBlock1d on (B, C, 1, L) with its FiLM scale and shift given."""

    def __init__(self, blk: CondResBlock1d, length: int) -> None:
        super().__init__()
        self.b1 = Block2d(blk.b1, length)
        self.b2 = Block2d(blk.b2, length)
        self.skip = _conv2d(blk.skip) if isinstance(blk.skip, nn.Conv1d) else nn.Identity()

    def forward(self, x: Tensor, scale: Tensor, shift: Tensor) -> Tensor:
        return self.b2(self.b1(x) * scale + shift) + self.skip(x)


class FastUnet(nn.Module):
    """ConditionalUnet1d with precomputed per-step FiLM terms, for a fixed list of steps."""

    film_table: Tensor

    def __init__(self, unet: ConditionalUnet1d, horizon: int, timesteps: list[int]) -> None:
        super().__init__()
        length = horizon
        self.down = nn.ModuleList()
        self.down_conv = nn.ModuleList()
        order: list[CondResBlock1d] = []
        for level in unet.down:
            *res, down = level  # type: ignore[misc]
            self.down.append(nn.ModuleList([ResBlock2d(r, length) for r in res]))
            order += res
            if isinstance(down, nn.Conv1d):
                self.down_conv.append(_conv2d(down))
                length = (length + 1) // 2
            else:
                self.down_conv.append(nn.Identity())
        self.mid = nn.ModuleList([ResBlock2d(r, length) for r in unet.mid])  # type: ignore[arg-type]
        order += list(unet.mid)  # type: ignore[arg-type]
        self.up = nn.ModuleList()
        self.up_conv = nn.ModuleList()
        for level in unet.up:
            *res, up = level  # type: ignore[misc]
            self.up.append(nn.ModuleList([ResBlock2d(r, length) for r in res]))
            order += res
            self.up_conv.append(_conv_t2d(up))
            length *= 2
        final_block, final_conv = unet.final
        self.final = nn.Sequential(Block2d(final_block, length), _conv2d(final_conv))  # type: ignore[arg-type]

        # FiLM of block j: W_j [act(step_t); act(cond)] + b_j (g = [step; cond] in the U-Net)
        sd = unet.step_dim
        self.film_act = _act(order[0].film[0])
        lin: list[nn.Linear] = [blk.film[1] for blk in order]  # type: ignore[misc]
        self.sizes = [blk.cout for blk in order for _ in range(2)]  # scale, shift per block
        with torch.no_grad():
            t = torch.tensor(timesteps, dtype=torch.float32)
            step = self.film_act(unet.step_mlp(step_embedding(t, sd)))  # type: ignore[operator]
            table = torch.cat([step @ m.weight[:, :sd].T + m.bias for m in lin], 1)  # (S, F)
            w_cond = torch.cat([m.weight[:, sd:] for m in lin], 0)  # (F, cond_dim)
        self.steps = len(timesteps)
        self.register_buffer("film_table", table.contiguous())
        self.w_cond = nn.Parameter(w_cond.contiguous(), requires_grad=False)

    def films(self, cond: Tensor) -> list[list[tuple[Tensor, Tensor]]]:
        """Per DDIM step, per block (scale, shift), each (B, C, 1, 1)."""
        per_cond = F.linear(self.film_act(cond), self.w_cond)  # type: ignore[operator]
        total = self.film_table.numel()
        all_ = (per_cond[:, None] + self.film_table[None]).reshape(-1, total, 1, 1)
        pieces = torch.split(all_, self.sizes * self.steps, 1)
        nb = len(self.sizes) // 2
        return [
            [(pieces[2 * (i * nb + j)], pieces[2 * (i * nb + j) + 1]) for j in range(nb)]
            for i in range(self.steps)
        ]

    def forward(self, x: Tensor, film: list[tuple[Tensor, Tensor]]) -> Tensor:
        """Noise prediction for x (B, D, 1, H) at one step given that step's FiLM terms."""
        it = iter(film)
        h = x
        skips = []
        res: Any
        for res, down in zip(self.down, self.down_conv, strict=True):
            for r in res:
                h = r(h, *next(it))
            skips.append(h)
            h = down(h)
        for r in self.mid:
            h = r(h, *next(it))
        for res, up in zip(self.up, self.up_conv, strict=True):
            h = self._join(h, skips.pop())
            for r in res:
                h = r(h, *next(it))
            h = up(h)
        return self.final(h)  # type: ignore[no-any-return]

    def _join(self, h: Tensor, skip: Tensor) -> Tensor:
        """The up path's input: h and the down path's skip, along the channels."""
        return torch.cat([h, skip], 1)


def _grouped_conv(convs: list[nn.Module], shared: bool) -> nn.Module:
    """One Conv2d / ConvTranspose2d computing K same-shaped ones side by side: on one shared
    input (``shared``, plain convolutions only; the outputs concatenated), or each on its
    own block of the input channels (groups=K; a transposed one block-diagonal)."""
    first = convs[0]
    if isinstance(first, nn.Identity):
        return first
    assert isinstance(first, (nn.Conv2d, nn.ConvTranspose2d)) and first.groups == 1
    k = len(convs)
    transposed = isinstance(first, nn.ConvTranspose2d)
    assert not (shared and transposed)
    kind = nn.ConvTranspose2d if transposed else nn.Conv2d
    # a transposed one is block-diagonal with groups=1 (exact zeros between the experts):
    # onnx's reference evaluator has no grouped ConvTranspose, and these up-samplings are
    # a small share of the U-Net
    groups = 1 if shared or transposed else k
    out = kind(
        first.in_channels * (1 if shared else k),
        first.out_channels * k,
        first.kernel_size,  # type: ignore[arg-type]
        first.stride,  # type: ignore[arg-type]
        first.padding,  # type: ignore[arg-type]
        groups=groups,
        bias=first.bias is not None,
    )
    with torch.no_grad():
        if transposed:  # weights (in, out, ...): expert e's block on the diagonal
            out.weight.zero_()
            cin, cout = first.in_channels, first.out_channels
            for e, c in enumerate(convs):
                out.weight[e * cin : (e + 1) * cin, e * cout : (e + 1) * cout] = c.weight  # type: ignore[index]
        else:  # Conv2d weights (out, in / groups, ...): the K stacked along the first axis
            out.weight.copy_(torch.cat([c.weight for c in convs], 0))  # type: ignore[union-attr]
        if out.bias is not None:
            out.bias.copy_(torch.cat([c.bias for c in convs], 0))  # type: ignore[union-attr]
    return out


def _grouped_norm(norms: list[Norm2d], length: int) -> Norm2d:
    """K Norm2d side by side: K x groups groups over K x channels (the groups are
    contiguous channel blocks, so each expert's normalization is unchanged)."""
    k, first = len(norms), norms[0]
    c = first.shape[0]
    gn = nn.GroupNorm(first.groups * k, c * k, eps=first.eps)
    with torch.no_grad():
        # a one-group Norm2d holds its affine expanded over the sequence: one column of it
        flat = (lambda t: t[:, 0, 0]) if first.groups == 1 else (lambda t: t)
        gn.weight.copy_(torch.cat([flat(n.weight) for n in norms]))
        gn.bias.copy_(torch.cat([flat(n.bias) for n in norms]))
    return Norm2d(gn, length)


class _GroupedBlock(nn.Module):
    """K Block2d side by side (see GroupedUnet)."""

    def __init__(self, blocks: list[Block2d], length: int, shared: bool) -> None:
        super().__init__()
        self.conv = _grouped_conv([b.conv for b in blocks], shared)
        self.norm = _grouped_norm([b.norm for b in blocks], length)  # type: ignore[misc]
        self.act = blocks[0].act

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.norm(self.conv(x)))  # type: ignore[operator]


class _GroupedRes(nn.Module):
    """K ResBlock2d side by side, their FiLM terms concatenated (see GroupedUnet)."""

    def __init__(self, blocks: list[ResBlock2d], length: int, shared: bool) -> None:
        super().__init__()
        k = len(blocks)
        self.b1 = _GroupedBlock([b.b1 for b in blocks], length, shared)
        self.b2 = _GroupedBlock([b.b2 for b in blocks], length, False)
        self.skip = _grouped_conv([b.skip for b in blocks], shared)
        # an identity skip of a shared input: each expert adds the same input
        self.repeat = k if shared and isinstance(self.skip, nn.Identity) else 1

    def forward(self, x: Tensor, scale: Tensor, shift: Tensor) -> Tensor:
        skip = self.skip(x)
        if self.repeat > 1:
            skip = skip.repeat(1, self.repeat, 1, 1)
        return self.b2(self.b1(x) * scale + shift) + skip  # type: ignore[no-any-return]


class GroupedUnet(FastUnet):
    """K FastUnets of one shape (model.task_experts' experts) as one network whose every
    convolution is grouped (groups=K) and every norm spans the K experts' channel blocks:
    forward(x, film) -> (B, K x D, 1, H), the K noise predictions stacked, for the same
    FLOPs in a quarter of the nodes (onnxruntime's per-node overhead dominates at batch 1,
    module docstring). films() gives the K experts' FiLM terms in the matching layout."""

    def __init__(self, unets: list[FastUnet]) -> None:  # noqa: PLR0915
        nn.Module.__init__(self)
        k, first = len(unets), unets[0]
        self.k = k

        def res(level: list[nn.ModuleList], i: int, length: int, shared: bool) -> nn.ModuleList:
            blocks = [list(lv[i]) for lv in level]  # type: ignore[arg-type]
            return nn.ModuleList(
                _GroupedRes([b[j] for b in blocks], length, shared and j == 0)  # type: ignore[misc]
                for j in range(len(blocks[0]))
            )

        # the sequence lengths, as FastUnet computed them: read back from the norms
        def length_of(blocks: nn.ModuleList, fallback: int) -> int:
            return int(blocks[0].b1.norm.shape[2]) if len(blocks) else fallback

        self.down, self.down_conv = nn.ModuleList(), nn.ModuleList()
        assert len(first.down) and len(first.down[0]), "a U-Net's first level has blocks"
        shared = True
        length = int(first.final[0].norm.shape[2])  # type: ignore[index]
        for i in range(len(first.down)):
            blocks = res([u.down for u in unets], i, length_of(first.down[i], length), shared)  # type: ignore[misc]
            self.down.append(blocks)
            self.down_conv.append(_grouped_conv([u.down_conv[i] for u in unets], False))
            shared = shared and len(blocks) == 0
        self.mid = nn.ModuleList(
            _GroupedRes([u.mid[j] for u in unets], int(u0.b1.norm.shape[2]), False)  # type: ignore[misc]
            for j, u0 in enumerate(first.mid)
        )
        self.up, self.up_conv = nn.ModuleList(), nn.ModuleList()
        for i in range(len(first.up)):
            self.up.append(res([u.up for u in unets], i, length_of(first.up[i], length), False))  # type: ignore[misc]
            self.up_conv.append(_grouped_conv([u.up_conv[i] for u in unets], False))
        final_blocks = [u.final[0] for u in unets]  # type: ignore[index]
        self.final = nn.Sequential(
            _GroupedBlock(final_blocks, int(first.final[0].norm.shape[2]), False),  # type: ignore[index, arg-type]
            _grouped_conv([u.final[1] for u in unets], False),  # type: ignore[index]
        )
        # FiLM: piece p (a block's scale or shift, c_p channels at offset o_p of one
        # expert's F columns per step) becomes the K experts' c_p columns side by side
        self.film_act = first.film_act
        self.steps = first.steps
        self.sizes = [c * k for c in first.sizes]
        f = sum(first.sizes)
        offsets = [sum(first.sizes[:p]) for p in range(len(first.sizes))]
        idx = torch.cat(
            [
                torch.arange(e * f + o, e * f + o + c)
                for o, c in zip(offsets, first.sizes, strict=True)
                for e in range(k)
            ]
        )
        with torch.no_grad():
            table = torch.cat([u.film_table for u in unets], 1)[:, idx]
            w_cond = torch.cat([u.w_cond for u in unets], 0)[idx]
        self.register_buffer("film_table", table.contiguous())
        self.w_cond = nn.Parameter(w_cond.contiguous(), requires_grad=False)

    def _join(self, h: Tensor, skip: Tensor) -> Tensor:
        """[h_1 .. h_K] and [s_1 .. s_K] -> [h_1 s_1 .. h_K s_K]: each expert's own input
        block for the grouped convolutions after it."""
        joined = torch.cat([h.unflatten(1, (self.k, -1)), skip.unflatten(1, (self.k, -1))], 2)
        return joined.flatten(1, 2)


class FastSampler(nn.Module):
    """forward(obs dict, noise (B, H, D)) -> actions (B, H, D), as ``net.sample(obs, noise,
    steps)`` computes them, in the node-lean form above (U-Net denoisers only; per-task
    experts as one GroupedUnet unless ``grouped`` is False)."""

    def __init__(self, net: DiffusionNet, steps: int, grouped: bool = True) -> None:
        super().__init__()
        self.net = net
        self.steps = steps
        self.flow = net.cfg.objective == "flow"
        ts: list[Any] = (
            flow_timesteps(net.cfg, steps) if self.flow else ddim_timesteps(net.cfg, steps)
        )
        ab = alphas_cumprod(net.cfg)
        ratio = net.cfg.num_train_timesteps // len(ts)
        self.coef = []
        for t in [] if self.flow else ts:
            a_t = float(ab[t])
            a_prev = float(ab[t - ratio]) if t - ratio >= 0 else 1.0
            self.coef.append((math.sqrt(1 - a_t), math.sqrt(a_t), math.sqrt(a_prev), a_prev))
        # per-task experts (model.task_experts): one fast U-Net each, mixed by the gate that
        # DiffusionNet.encode appends to the conditioning
        den = net.denoiser
        unets = list(den.experts) if isinstance(den, ExpertDenoiser) else [den]
        self.unets = (
            nn.ModuleList(FastUnet(u, net.cfg.horizon, ts) for u in unets)  # type: ignore[arg-type]
            if all(isinstance(u, ConditionalUnet1d) for u in unets)
            else None
        )
        self.n_experts = net.n_experts
        # the experts as one grouped U-Net (``grouped``): one node where there were K
        self.grouped = (
            GroupedUnet(list(self.unets))  # type: ignore[arg-type]
            if grouped and self.unets is not None and len(self.unets) > 1
            else None
        )

    def _films(self, cond: Tensor) -> tuple[Tensor | None, list[list[list[tuple[Tensor, Tensor]]]]]:
        """The experts' gate (None without experts) and each U-Net's FiLM terms per step
        (the grouped U-Net's alone, when there is one)."""
        gate = None
        if self.n_experts:
            gate, cond = cond[:, -self.n_experts :], cond[:, : -self.n_experts]
        if self.grouped is not None:
            return gate, [self.grouped.films(cond)]
        assert self.unets is not None
        return gate, [u.films(cond) for u in self.unets]  # type: ignore[operator]

    def _mix(self, x: Tensor, k: int, gate: Tensor | None, films: list[Any]) -> Tensor:
        if self.grouped is not None:
            assert gate is not None
            out = self.grouped(x, films[0][k])  # (B, K x D, 1, H)
            out = out.unflatten(1, (self.n_experts, -1))
            return (out * gate[:, :, None, None, None]).sum(1)
        assert self.unets is not None
        outs = [u(x, f[k]) for u, f in zip(self.unets, films, strict=True)]
        return outs[0] if gate is None else mix_experts(gate, outs)

    def forward(self, obs: dict[str, Tensor], noise: Tensor) -> Tensor:
        if self.unets is None:
            return self.net.sample(obs, noise, self.steps)
        gate, films = self._films(self.net.encode(obs))
        null_gate, nulls = (
            self._films(self.net.encode(obs, False)) if self.net.guided else (None, None)
        )

        def predict(x: Tensor, k: int) -> Tensor:
            out = self._mix(x, k, gate, films)
            if nulls is None:
                return out
            return self.net.guide(out, self._mix(x, k, null_gate, nulls))

        x = noise.transpose(1, 2)[:, :, None]  # (B, D, 1, H)
        if self.flow:  # Euler steps along the predicted velocity
            for k in range(self.steps):
                x = x + predict(x, k) * (1.0 / self.steps)
            return self.net.to_actions(x[:, :, 0].transpose(1, 2).clamp(-1.0, 1.0))
        for k, (s1, sa, sp, a_prev) in enumerate(self.coef):
            eps = predict(x, k)
            x0 = ((x - s1 * eps) / sa).clamp(-1.0, 1.0)
            x = sp * x0 + math.sqrt(1 - a_prev) * eps
        return self.net.to_actions(x[:, :, 0].transpose(1, 2))
