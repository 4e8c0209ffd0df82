"""Chainer's order samplers (defined by the engine, :mod:`dataset_kit.engine.samplers`)."""

from dataset_kit.engine import OrderSampler, ShuffleOrderSampler, draw_seed

__all__ = ["OrderSampler", "ShuffleOrderSampler", "draw_seed"]
