"""Checks the elastic examples' tests share (tests/example/
test_pytorch_elastic.py, tests/tensorflow/test_keras_elastic.py)."""


def assert_rank_1_lost(tc, r, lines, example, reset_re, info):
    """The process that started as rank 1 on localhost failed by
    --fail-at 1:1: its exception, horovodrun's warnings (the failure, the
    host blacklisted), and one reset to 2 ranks in rank 0's lines."""
    tc.assertIn("RuntimeError: %s: process started as rank 1 fails in "
                "epoch 1 (--fail-at)" % example, r.out + r.err, info)
    warnings = r.warning_lines()
    tc.assertTrue(any("rank 1 on localhost exited with status 1" in w
                      for w in warnings), info)
    tc.assertTrue(any("host localhost is blacklisted" in w
                      for w in warnings), info)
    tc.assertEqual([reset_re.match(l).group(1) for l in lines
                    if reset_re.match(l)], ["2"], info)
