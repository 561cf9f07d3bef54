/* Unit tests for host lists from the environment (lib/clusterhosts.c). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/lib/clusterhosts.h"
#include "launcher/lib/errcode.h"
#include "tmppath.h"

static struct hvd_hostlist hl;
static char err[512];

static const char *const vars[] = {
    "PBS_NODEFILE",
    "LSB_MCPU_HOSTS",
    "LSB_HOSTS",
    "OMPI_MCA_orte_default_hostfile",
};

static void setup(void)
{
    size_t i;

    hvd_hostlist_init(&hl);
    memset(err, 'Z', sizeof(err));
    for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
}

static void teardown(void)
{
    hvd_hostlist_close(&hl);
}

TestSuite(clusterhosts, .init = setup, .fini = teardown);

static void expect_host(size_t i, const char *name, int slots)
{
    cr_assert_lt(i, hl.n);
    cr_assert_str_eq(hl.hosts[i].name, name);
    cr_assert_eq(hl.hosts[i].slots, slots, "host %s: %d slots", name,
                 hl.hosts[i].slots);
}

Test(clusterhosts, lsb_mcpu_hosts)
{
    cr_assert_eq(hvd_cluster_parse_lsb_mcpu(
                     &hl, " n1.example.org 4\tn2 2\nn1.example.org 1 ", err,
                     sizeof(err)),
                 0);
    cr_assert_str_eq(err, "");
    cr_assert_eq(hl.n, 2);
    expect_host(0, "n1.example.org", 5);
    expect_host(1, "n2", 2);
}

Test(clusterhosts, lsb_mcpu_hosts_errors)
{
    static const struct {
        const char *in;
        int rc;
        const char *msg;
    } cases[] = {
        {"a 4 b", HVD_EPARSE,
         "LSB_MCPU_HOSTS: 'a 4 b': a host without a slot count"},
        {"a x", HVD_ERANGE,
         "LSB_MCPU_HOSTS: 'a x': slot count 'x' of host 'a' is not a "
         "positive integer up to 65536"},
        {"a 0", HVD_ERANGE,
         "LSB_MCPU_HOSTS: 'a 0': slot count '0' of host 'a' is not a "
         "positive integer up to 65536"},
        {"a 65537", HVD_ERANGE,
         "LSB_MCPU_HOSTS: 'a 65537': slot count '65537' of host 'a' is not "
         "a positive integer up to 65536"},
        {"a 65536 a 1", HVD_ERANGE,
         "LSB_MCPU_HOSTS: host 'a' adds up to more than 65536 slots"},
        {"a,b 2", HVD_EPARSE,
         "LSB_MCPU_HOSTS: 'a,b 2': 'a,b' is not a host name"},
        {"  \n", HVD_EPARSE, "LSB_MCPU_HOSTS is set but lists no hosts"},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hvd_hostlist_close(&hl);
        cr_assert_eq(
            hvd_cluster_parse_lsb_mcpu(&hl, cases[i].in, err, sizeof(err)),
            cases[i].rc, "input %zu", i);
        cr_assert_str_eq(err, cases[i].msg, "input %zu", i);
    }
}

Test(clusterhosts, lsb_hosts)
{
    cr_assert_eq(
        hvd_cluster_parse_lsb_hosts(&hl, "b a b b c.x", err, sizeof(err)), 0);
    cr_assert_str_eq(err, "");
    cr_assert_eq(hl.n, 3);
    expect_host(0, "b", 3);
    expect_host(1, "a", 1);
    expect_host(2, "c.x", 1);
    hvd_hostlist_close(&hl);
    cr_assert_eq(hvd_cluster_parse_lsb_hosts(&hl, "a [b", err, sizeof(err)),
                 HVD_EPARSE);
    cr_assert_str_eq(err, "LSB_HOSTS: 'a [b': '[b' is not a host name");
    hvd_hostlist_close(&hl);
    cr_assert_eq(hvd_cluster_parse_lsb_hosts(&hl, "", err, sizeof(err)),
                 HVD_EPARSE);
    cr_assert_str_eq(err, "LSB_HOSTS is set but lists no hosts");
    cr_assert_eq(hvd_cluster_parse_lsb_hosts(NULL, "a", err, sizeof(err)),
                 HVD_EINVAL);
}

Test(clusterhosts, order_of_the_variables)
{
    cr_assert_null(hvd_cluster_hosts_var());
    setenv("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile", 1);
    cr_assert_str_eq(hvd_cluster_hosts_var(), "OMPI_MCA_orte_default_hostfile");
    setenv("LSB_HOSTS", "a", 1);
    cr_assert_str_eq(hvd_cluster_hosts_var(), "LSB_HOSTS");
    setenv("LSB_MCPU_HOSTS", "a 1", 1);
    cr_assert_str_eq(hvd_cluster_hosts_var(), "LSB_MCPU_HOSTS");
    /* Set but empty is as good as unset. */
    setenv("PBS_NODEFILE", "", 1);
    cr_assert_str_eq(hvd_cluster_hosts_var(), "LSB_MCPU_HOSTS");
    setenv("PBS_NODEFILE", "/x", 1);
    cr_assert_str_eq(hvd_cluster_hosts_var(), "PBS_NODEFILE");
    cr_assert(hvd_cluster_var_is_file("PBS_NODEFILE"));
    cr_assert(hvd_cluster_var_is_file("OMPI_MCA_orte_default_hostfile"));
    cr_assert(!hvd_cluster_var_is_file("LSB_HOSTS"));
}

/* Writes text to a new file and returns its name, for the file sources. */
static const char *tmpfile_with(const char *text)
{
    static char path[64];
    int fd;

    tmp_template(path, sizeof(path), "hvd-clusterhosts");
    fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

Test(clusterhosts, files_and_variables)
{
    const char *path = tmpfile_with("n1\nn1\nn2\nn1\n");
    char want[256];

    setenv("PBS_NODEFILE", path, 1);
    cr_assert_eq(hvd_cluster_hosts(&hl, "PBS_NODEFILE", err, sizeof(err)), 0);
    cr_assert_eq(hl.n, 2);
    expect_host(0, "n1", 3);
    expect_host(1, "n2", 1);
    hvd_hostlist_close(&hl);
    unlink(path);
    cr_assert_eq(hvd_cluster_hosts(&hl, "PBS_NODEFILE", err, sizeof(err)),
                 HVD_EIO);
    snprintf(want, sizeof(want),
             "PBS_NODEFILE: cannot read hostfile '%s': No such file or "
             "directory",
             path);
    cr_assert_str_eq(err, want);

    /* The MPI Operator's Open MPI form, a malformed line naming file:line. */
    path = tmpfile_with("w0.svc slots=2\nw1.svc slots=2 max_slots=2\nw2 x\n");
    setenv("OMPI_MCA_orte_default_hostfile", path, 1);
    cr_assert_eq(hvd_cluster_hosts(&hl, "OMPI_MCA_orte_default_hostfile", err,
                                   sizeof(err)),
                 HVD_EPARSE);
    snprintf(want, sizeof(want),
             "OMPI_MCA_orte_default_hostfile: %s:3: expected 'host', "
             "'host:N' or 'host slots=N', got 'w2 x'",
             path);
    cr_assert_str_eq(err, want);
    hvd_hostlist_close(&hl);
    /* Its Intel MPI form. */
    path = tmpfile_with("w0.svc:2\nw1.svc:2\n");
    setenv("OMPI_MCA_orte_default_hostfile", path, 1);
    cr_assert_eq(hvd_cluster_hosts(&hl, "OMPI_MCA_orte_default_hostfile", err,
                                   sizeof(err)),
                 0);
    expect_host(1, "w1.svc", 2);
    unlink(path);
    hvd_hostlist_close(&hl);

    setenv("LSB_HOSTS", "h h", 1);
    cr_assert_eq(hvd_cluster_hosts(&hl, "LSB_HOSTS", err, sizeof(err)), 0);
    expect_host(0, "h", 2);
    hvd_hostlist_close(&hl);
    setenv("LSB_MCPU_HOSTS", "h", 1);
    cr_assert_eq(hvd_cluster_hosts(&hl, "LSB_MCPU_HOSTS", err, sizeof(err)),
                 HVD_EPARSE);
    cr_assert_str_eq(err, "LSB_MCPU_HOSTS: 'h': a host without a slot count");
    cr_assert_eq(hvd_cluster_hosts(&hl, "NOT_SET_HERE", err, sizeof(err)),
                 HVD_EINVAL);
}
