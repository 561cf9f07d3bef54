/* horovodrun ps, logs, attach and stop: the detached jobs' commands. */
#ifndef HR_CLIENT_H
#define HR_CLIENT_H

/* Whether word (argv[1]) names one of the commands. */
int hr_client_is_command(const char *word);
/* Runs the command argv[0] with its options; returns the exit code. */
int hr_client_main(int argc, char **argv);
/* horovodrun ps [--prune] (ps.c). */
int hr_ps_main(int argc, char **argv);

#endif
