"""Residual RL fine-tuning of a frozen chunked policy (ResiP / ResFiT style).

A small per-step residual policy sees the latest observation and the frozen base's action
for the step and adds a bounded correction; base + residual goes through the same safety
filter as every other command. ``tether finetune`` trains it (PPO or off-policy), ``tether
export`` writes base + residual as one model folder. See docs/residual_rl.md.
"""
