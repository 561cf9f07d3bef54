"""Run under horovodrun: the last rank kills itself in the middle of a
training step; every other rank must see HorovodInternalError from the
tape's gradient(), with libhvd's account of the failure. The ranks
outlive horovodrun's SIGTERM, so that each reports what it saw."""

import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402

signal.signal(signal.SIGTERM, lambda *_: None)
hvd.init()
w = tf.Variable(tf.ones([64, 64]))
for step in range(1000):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.random.normal([8, 64]) @ w)
    if step == 3 and hvd.rank() == hvd.size() - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        hvd.DistributedGradientTape(tape).gradient(loss, [w])
    except hvd.HorovodInternalError as e:
        print("tfkill: rank %d: HorovodInternalError at step %d: %s"
              % (hvd.rank(), step, e), flush=True)
        sys.exit(3)
print("tfkill: rank %d: no error" % hvd.rank(), flush=True)
