"""What horovod's framework front ends share: the libhvd binding, the
job's basic functions, process sets and exceptions."""
