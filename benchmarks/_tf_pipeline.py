"""The issue's pipeline in tf.data, for benchmarks/autotune.py (run by a Python with tensorflow).

Decode -> random resized crop to 224 -> flip -> normalize -> batch 32, with
``map(num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)``; prints the seconds of
one epoch's loop (the import of tensorflow not counted).
"""

from __future__ import annotations

import os
import sys
import time

import tensorflow as tf


def main(folder: str) -> None:
    """Run the pipeline over ``folder``'s JPEGs; print the seconds of the loop."""

    mean = tf.constant([0.485, 0.456, 0.406]) * 255
    std = tf.constant([0.229, 0.224, 0.225]) * 255

    def load(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(image), tf.zeros([1, 0, 4]), area_range=(0.08, 1.0),
            aspect_ratio_range=(3 / 4, 4 / 3), use_image_if_no_bounding_boxes=True)
        image = tf.image.resize(tf.slice(image, begin, size), (224, 224))
        image = tf.image.random_flip_left_right(image)
        return tf.transpose((image - mean) / std, (2, 0, 1))

    files = sorted(os.path.join(folder, f) for f in os.listdir(folder))
    ds = (tf.data.Dataset.from_tensor_slices(files).shuffle(len(files), seed=0)
          .map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(32, drop_remainder=True)
          .prefetch(tf.data.AUTOTUNE))
    start = time.perf_counter()
    for batch in ds:
        batch.numpy()
    print(time.perf_counter() - start)


if __name__ == "__main__":
    main(sys.argv[1])
