"""horovod.runner on libhvd: the helpers of Horovod's runner package that
training scripts and Horovod's own tests import.

Jobs are started by the horovodrun program (a native launcher), not from
Python: Horovod's ``horovod.run()`` API is not provided.
"""
