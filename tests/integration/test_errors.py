"""Integration tests: input errors, exec errors, --help and --version."""

import os
import pty
import select
import subprocess
import termios

import hvdtest
from hvdtest import sh

ERR = hvdtest.ERR_PREFIX
USAGE = ("usage: horovodrun -np N [-H host:slots,...] [options] command "
         "[args...]")


class UsageErrorTest(hvdtest.TestCase):
    """Each bad input: exit 2, exactly one line on stderr, nothing run."""

    def check(self, args, message=None, contains=(), env=None):
        ran = os.path.join(self.tmp, "ran")
        cmd = list(args)
        res = self.run_hr(*cmd, env=env)
        self.assertRc(res, 2)
        self.assertEqual(res.out, "", res.describe())
        self.assertEqual(len(res.err_lines), 1, res.describe())
        line = res.err_lines[0]
        self.assertTrue(line.startswith(ERR), line)
        if message is not None:
            self.assertEqual(line, ERR + message)
        for c in contains:
            self.assertIn(c, line)
        self.assertFalse(os.path.exists(ran))
        self.assertEqual(hvdtest.marked_procs(self.marker), [])
        return line

    def touch(self):
        return ["touch", os.path.join(self.tmp, "ran")]

    def test_np_missing(self):
        self.check(self.touch(), "-np is required: the number of processes "
                   "to start, e.g. horovodrun -np 4 ./train")
        self.check(["-H", "localhost:2"] + self.touch(),
                   contains=["-np is required"])

    def test_np_zero(self):
        self.check(["-np", "0"] + self.touch(),
                   "-np must be a positive integer, got '0'")

    def test_np_negative(self):
        self.check(["-np", "-1"] + self.touch(),
                   "-np must be a positive integer, got '-1'")

    def test_np_not_a_number(self):
        self.check(["-np", "abc"] + self.touch(),
                   "-np must be a positive integer, got 'abc'")
        self.check(["-np", "4x"] + self.touch(),
                   "-np must be a positive integer, got '4x'")
        self.check(["-np", ""] + self.touch(),
                   "-np must be a positive integer, got ''")

    def test_np_without_value(self):
        self.check(["-np"], "option '-np/--num-proc' needs an argument")

    def test_more_processes_than_slots(self):
        line = self.check(["-np", "5", "-H", "localhost:4"] + self.touch(),
                          "-np 5 is more than the 4 slots in the host list; "
                          "lower -np or add slots")
        self.assertIn("5", line)
        self.assertIn("4", line)
        self.check(["-np", "4", "-H", "localhost:1,127.0.0.1:2"] +
                   self.touch(), contains=["-np 4", "3 slots"])

    def test_malformed_host_token(self):
        for spec, tok in (("localhost:x", "localhost:x"),
                          ("localhost:2,127.0.0.1:", "127.0.0.1:"),
                          ("localhost:0", "localhost:0"),
                          ("localhost:-1", "localhost:-1"),
                          ("localhost:2,:3", ":3"),
                          ("localhost:2,,127.0.0.1:1", ""),
                          ("a b:1", "a b:1")):
            self.check(["-np", "1", "-H", spec] + self.touch(),
                       "malformed -H entry '%s': expected host:slots with "
                       "slots a positive integer" % tok)

    def test_empty_hosts(self):
        self.check(["-np", "1", "-H", ""] + self.touch(), "-H lists no hosts")

    def test_duplicate_host(self):
        self.check(["-np", "2", "-H", "localhost:1,localhost:1"] +
                   self.touch(),
                   "host 'localhost' appears more than once in -H; list each "
                   "host once with all its slots")
        self.check(["-np", "2", "-H", "127.0.0.1:1,localhost:1,127.0.0.1:2"]
                   + self.touch(), contains=["'127.0.0.1'", "more than once"])

    def hostfile(self, text, name="hosts"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_hostfile_missing(self):
        path = os.path.join(self.tmp, "no-such-hostfile")
        self.check(["-np", "1", "--hostfile", path] + self.touch(),
                   "cannot read hostfile '%s': No such file or directory"
                   % path)

    def test_hostfile_is_directory(self):
        self.check(["-np", "1", "--hostfile", self.tmp] + self.touch(),
                   "cannot read hostfile '%s': Is a directory" % self.tmp)

    def test_hostfile_unreadable(self):
        if os.geteuid() == 0:
            # Root reads files whatever their mode; reading a process's own
            # memory at offset 0 fails for everyone.
            path, why = "/proc/self/mem", "Input/output error"
        else:
            path = self.hostfile("localhost slots=1\n")
            os.chmod(path, 0)
            why = "Permission denied"
        self.check(["-np", "1", "--hostfile", path] + self.touch(),
                   "cannot read hostfile '%s': %s" % (path, why))

    def test_hostfile_malformed(self):
        path = self.hostfile("# hosts\n\nlocalhost slots=2\n"
                             "bogus line here\n")
        self.check(["-np", "1", "--hostfile", path] + self.touch(),
                   "%s:4: expected 'host', 'host:N' or 'host slots=N', got "
                   "'bogus line here'" % path)
        path = self.hostfile("localhost:x\n", "hosts2")
        self.check(["-np", "1", "--hostfile", path] + self.touch(),
                   "%s:1: expected 'host', 'host:N' or 'host slots=N', got "
                   "'localhost:x'" % path)
        path = self.hostfile("\n\nlocalhost slots=x\n", "hosts3")
        self.check(["-np", "1", "--hostfile", path] + self.touch(),
                   contains=["%s:3: " % path, "'x'"])
        path = self.hostfile("localhost slots=0\n", "hosts4")
        self.check(["-np", "1", "--hostfile", path] + self.touch(),
                   contains=["%s:1: " % path, "'0'"])

    def test_hostfile_empty(self):
        path = self.hostfile("# nothing here\n\n   \n")
        self.check(["-np", "1", "--hostfile", path] + self.touch(),
                   "%s: the hostfile lists no hosts" % path)

    def test_hostfile_host_adding_up_past_the_limit(self):
        # Repeated lines add up (as in Open MPI, and PBS_NODEFILE's one
        # line per slot), to at most 65536 slots a host.
        path = self.hostfile("localhost slots=65536\n127.0.0.1\n"
                             "# again:\nlocalhost\n")
        self.check(["-np", "1", "--hostfile", path] + self.touch(),
                   "%s:4: host 'localhost' adds up to more than 65536 slots "
                   "(first on line 1)" % path)

    def test_hostfile_too_few_slots(self):
        path = self.hostfile("localhost slots=2\n")
        self.check(["-np", "3", "--hostfile", path] + self.touch(),
                   "-np 3 is more than the 2 slots in the host list; lower "
                   "-np or add slots")

    def test_hosts_and_hostfile(self):
        path = self.hostfile("localhost slots=2\n")
        self.check(["-np", "1", "-H", "localhost:1", "--hostfile", path] +
                   self.touch(),
                   "-H/--hosts and --hostfile cannot be used together; "
                   "pick one")

    def test_no_command(self):
        self.check(["-np", "2"], "no command given; " + USAGE)
        self.check(["-np", "2", "--"], "no command given; " + USAGE)

    def test_unknown_option(self):
        self.check(["-np", "1", "--bogus-option"] + self.touch(),
                   "unknown option '--bogus-option'; see horovodrun --help")
        self.check(["-x", "-np", "1"] + self.touch(),
                   "unknown option '-x'; see horovodrun --help")

    def test_bad_seconds(self):
        self.check(["-np", "1", "--kill-grace", "abc"] + self.touch(),
                   "--kill-grace must be a positive number of seconds, got "
                   "'abc'")
        self.check(["-np", "1", "--start-timeout", "0"] + self.touch(),
                   "--start-timeout must be a positive number of seconds, "
                   "got '0'")
        self.check(["-np", "1"] + self.touch(),
                   "HOROVOD_START_TIMEOUT must be a positive number of "
                   "seconds, got 'soon'",
                   env=self.env(HOROVOD_START_TIMEOUT="soon"))

    def script(self, name, mode):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\necho localhost:2\n")
        os.chmod(path, mode)
        return path

    def test_elastic_options(self):
        noexec = self.script("noexec.sh", 0o644)
        self.check(["-np", "2", "--host-discovery-script", noexec] +
                   self.touch(),
                   "--host-discovery-script '%s' is not executable; make it "
                   "so with chmod +x" % noexec)
        missing = os.path.join(self.tmp, "none.sh")
        self.check(["-np", "2", "--host-discovery-script", missing] +
                   self.touch(),
                   "--host-discovery-script '%s' does not exist; give the "
                   "path of an executable script" % missing)
        script = self.script("hosts.sh", 0o755)
        self.check(["-np", "2", "--min-np", "3", "--host-discovery-script",
                    script] + self.touch(),
                   "--min-np 3 is more than -np 2; lower --min-np or raise "
                   "-np")
        self.check(["-np", "2", "--blacklist-cooldown-range", "60", "10"] +
                   self.touch(),
                   "--blacklist-cooldown-range MIN 60 is more than MAX 10; "
                   "give the shorter cooldown first")
        self.check(["-np", "2", "--mpi", "--host-discovery-script", script] +
                   self.touch(),
                   contains=["--mpi cannot be used with elastic training",
                             "requires Gloo"])
        self.check(["-np", "2", "--host-discovery-script", script, "-H",
                    "localhost:2"] + self.touch(),
                   "--host-discovery-script cannot be used with -H/--hosts: "
                   "the script lists the hosts; pick one")
        # Valid elastic options run the job.
        res = self.run_hr("-np", "2", "--min-np", "1", "--max-np", "4",
                          "--host-discovery-script", script, *self.touch())
        self.assertRc(res, 0)
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "ran")))
        os.unlink(os.path.join(self.tmp, "ran"))



class HostfileTest(hvdtest.TestCase):

    def test_valid_hostfile_end_to_end(self):
        path = os.path.join(self.tmp, "hosts")
        with open(path, "w") as f:
            f.write("# two local names for this machine\n"
                    "\n"
                    "localhost slots=2   # the first\n"
                    "   \n"
                    "\t127.0.0.1\tslots=1\n"
                    "# trailing comment\n")
        res = self.run_hr("-np", "3", "--hostfile", path, *sh(
            'echo "$HOROVOD_HOSTNAME $HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE '
            '$HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE"'))
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines), [
            "[0,0]<stdout>:localhost 0 2 0 2",
            "[1,1]<stdout>:localhost 1 2 0 1",
            "[2,0]<stdout>:127.0.0.1 0 1 1 2"])
        self.assertEqual(res.err, "")

    def test_hostfile_host_without_slots_has_one(self):
        path = os.path.join(self.tmp, "hosts")
        with open(path, "w") as f:
            f.write("localhost\n")
        res = self.run_hr("-np", "1", "--hostfile", path, "true")
        self.assertRc(res, 0)
        res = self.run_hr("-np", "2", "--hostfile", path, "true")
        self.assertRc(res, 2)
        self.assertEqual(res.err_lines, [
            ERR + "-np 2 is more than the 1 slots in the host list; lower "
            "-np or add slots"])


class ExecErrorTest(hvdtest.TestCase):

    def test_command_not_found(self):
        res = self.run_hr("-np", "4", "./nope", "arg")
        self.assertRc(res, 127)
        line = ERR + ("rank 0 on localhost: cannot execute './nope': "
                      "No such file or directory")
        self.assertEqual(res.err_lines.count(line), 1, res.describe())
        self.assertEqual(res.err.count("cannot execute"), 1, res.describe())
        self.assertEqual(res.error_lines(), [line])
        self.assertEqual(res.out, "")
        self.assertNoneLeft(timeout=5)

    def test_command_not_in_path(self):
        name = "hvdtest-no-such-command-" + self.marker[-8:]
        res = self.run_hr("-np", "2", name)
        self.assertRc(res, 127)
        self.assertEqual(res.error_lines(), [
            ERR + "rank 0 on localhost: cannot execute '%s': No such file or "
            "directory" % name])

    def test_command_not_executable(self):
        path = os.path.join(self.tmp, "script.sh")
        with open(path, "w") as f:
            f.write("#!/bin/sh\necho hi\n")
        os.chmod(path, 0o644)
        res = self.run_hr("-np", "2", "./script.sh", cwd=self.tmp)
        self.assertRc(res, 126)
        self.assertEqual(res.error_lines(), [
            ERR + "rank 0 on localhost: cannot execute './script.sh': "
            "Permission denied"])
        self.assertEqual(res.err.count("cannot execute"), 1)
        self.assertEqual(res.out, "")

    def test_command_is_directory(self):
        os.mkdir(os.path.join(self.tmp, "adir"))
        res = self.run_hr("-np", "1", "./adir", cwd=self.tmp)
        self.assertRc(res, 126)
        self.assertEqual(len(res.error_lines()), 1, res.describe())
        self.assertIn("cannot execute './adir'", res.error_lines()[0])

    def test_not_found_on_second_host_only_once(self):
        res = self.run_hr("-np", "4", "-H", "localhost:2,127.0.0.1:2",
                          "./nope")
        self.assertRc(res, 127)
        self.assertEqual(res.err.count("cannot execute"), 1, res.describe())
        self.assertEqual(len(res.error_lines()), 1, res.describe())
        self.assertRegex(res.error_lines()[0],
                         r"rank \d on (localhost|127\.0\.0\.1): cannot "
                         r"execute './nope': No such file or directory$")


class HelpVersionTest(hvdtest.TestCase):

    OPTIONS = ["-np", "--num-proc", "-H", "--hosts", "--hostfile",
               "--output-filename", "--start-timeout", "--kill-grace",
               "--no-gpu-pinning", "--verbose", "-v", "--version", "-h",
               "--help"]

    def test_help(self):
        for flag in ("-h", "--help"):
            res = self.run_hr(flag)
            self.assertRc(res, 0)
            self.assertEqual(res.err, "")
            self.assertTrue(res.out.startswith("usage: horovodrun"), res.out)
            words = set(res.out.replace(",", " ").split())
            for opt in self.OPTIONS:
                self.assertIn(opt, words, "--help does not list " + opt)

    def test_help_wins_over_errors_after_it(self):
        res = self.run_hr("--help", "-np", "0")
        self.assertRc(res, 0)

    def test_version(self):
        for flag in ("-v", "--version"):
            res = self.run_hr(flag)
            self.assertRc(res, 0)
            self.assertRegex(res.out, r"^horovodrun \d+\.\d+\.\d+\S*\n$")
            self.assertEqual(res.err, "")

    def test_agent_version_and_refusal(self):
        res = hvdtest.run([hvdtest.HVD_AGENT, "--version"], env=self.env())
        self.assertRc(res, 0)
        self.assertRegex(res.out, r"^hvd-agent \d+\.\d+\.\d+\S*\n$")
        res = hvdtest.run([hvdtest.HVD_AGENT, "extra"], env=self.env())
        self.assertRc(res, 2)

    def agent_on_pty(self, stdin_pty, **env):
        """Runs hvd-agent with stdout on a new pseudo-terminal (in cooked
        mode, output processing on) and stdin a pipe, or the terminal too.
        Returns (process, master fd)."""
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)
        self.assertTrue(termios.tcgetattr(slave)[1] & termios.OPOST)
        p = subprocess.Popen([hvdtest.HVD_AGENT],
                             stdin=slave if stdin_pty else subprocess.PIPE,
                             stdout=slave, stderr=subprocess.PIPE,
                             env=self.env(**env))
        os.close(slave)
        self.addCleanup(p.kill)
        return p, master

    def test_agent_refuses_a_terminal(self):
        # By hand at a terminal, or with a terminal for its channel out
        # outside a Slurm step: one line, exit 2.
        for stdin_pty, step in ((True, "0"), (False, None)):
            with self.subTest(stdin_pty=stdin_pty, step=step):
                p, _ = self.agent_on_pty(stdin_pty, SLURM_STEP_ID=step)
                _, err = p.communicate(timeout=10)
                self.assertEqual(p.returncode, 2)
                self.assertIn("hvd-agent is started by horovodrun, not by "
                              "hand", err.decode())

    def test_agent_under_srun_unbuffered_makes_its_terminal_raw(self):
        # srun --unbuffered gives the agent a pseudo-terminal for stdout:
        # inside a step the agent takes it, raw, so that its frames pass
        # byte for byte (no newline translation), and says hello on it.
        p, master = self.agent_on_pty(False, SLURM_STEP_ID="3")
        ready, _, _ = select.select([master], [], [], 10)
        self.assertEqual(ready, [master], "no hello from the agent")
        self.assertGreater(len(os.read(master, 4096)), 0)
        self.assertEqual(termios.tcgetattr(master)[1] & termios.OPOST, 0)
        p.stdin.close()
        p.wait(10)


if __name__ == "__main__":
    hvdtest.main()
