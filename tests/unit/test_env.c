/* Unit tests for the env contract and GPU choice (launcher/lib/env.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "common/envc.h"

static const struct hvd_endpoints ep = {
    .rdv_addr = "10.0.0.1",
    .rdv_port = 4000,
    .master_addr = "a",
    .master_port = 29500,
    .secret_hex = "00ff",
    .start_timeout = 2.5,
};

Test(env, contract_for_uneven_hosts)
{
    struct hvd_hostlist hl;
    struct hvd_plan p;
    struct hvd_strvec env;

    hvd_hostlist_init(&hl);
    cr_assert_eq(hvd_hostlist_parse_spec(&hl, "a:1,b:2", NULL, 0), 0);
    cr_assert_eq(hvd_plan_build(&p, &hl, 3), 0);
    hvd_strvec_init(&env);
    cr_assert_eq(hvd_env_contract(&env, &p, &hl, 2, &ep), 0);

    struct {
        const char *name, *value;
    } want[] = {
        {HVD_ENV_RANK, "2"},
        {HVD_ENV_SIZE, "3"},
        {HVD_ENV_LOCAL_RANK, "1"},
        {HVD_ENV_LOCAL_SIZE, "2"},
        {HVD_ENV_CROSS_RANK, "0"},
        {HVD_ENV_CROSS_SIZE, "1"},
        {HVD_ENV_HOSTNAME, "b"},
        {HVD_ENV_RDV_ADDR, "10.0.0.1"},
        {HVD_ENV_RDV_PORT, "4000"},
        {HVD_ENV_SECRET, "00ff"},
        {HVD_ENV_START_TIMEOUT, "2.5"},
        {"RANK", "2"},
        {"WORLD_SIZE", "3"},
        {"LOCAL_RANK", "1"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"MASTER_ADDR", "a"},
        {"MASTER_PORT", "29500"},
        {"PYTHONUNBUFFERED", "1"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *v = hvd_strvec_getenv(&env, want[i].name);
        cr_assert_not_null(v, "%s missing", want[i].name);
        cr_expect_str_eq(v, want[i].value, "%s", want[i].name);
    }
    cr_expect_eq(env.n, sizeof(want) / sizeof(want[0]));
    cr_expect_lt(hvd_env_contract(&env, &p, &hl, 3, &ep), 0);
    hvd_strvec_close(&env);
    hvd_plan_close(&p);
    hvd_hostlist_close(&hl);
}

/* Real Horovod's Gloo ranks get what Horovod's own horovodrun sets. */
Test(env, gloo_rendezvous_variables)
{
    struct hvd_hostlist hl;
    struct hvd_plan p;
    struct hvd_strvec env;
    struct hvd_endpoints g = ep;

    g.gloo_port = 4100;
    g.gloo_iface = "eth1";
    g.nccl_ifnames = "eth1,eth2";
    hvd_hostlist_init(&hl);
    cr_assert_eq(hvd_hostlist_parse_spec(&hl, "a:2", NULL, 0), 0);
    cr_assert_eq(hvd_plan_build(&p, &hl, 2), 0);
    hvd_strvec_init(&env);
    cr_assert_eq(hvd_env_contract(&env, &p, &hl, 1, &g), 0);
    struct {
        const char *name, *value;
    } want[] = {
        {HVD_ENV_GLOO_RDV_ADDR, "10.0.0.1"},
        {HVD_ENV_GLOO_RDV_PORT, "4100"},
        {HVD_ENV_CONTROLLER, "gloo"},
        {HVD_ENV_CPU_OPERATIONS, "gloo"},
        {HVD_ENV_GLOO_IFACE, "eth1"},
        {HVD_ENV_NCCL_SOCKET_IFNAME, "eth1,eth2"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *v = hvd_strvec_getenv(&env, want[i].name);
        cr_assert_not_null(v, "%s missing", want[i].name);
        cr_expect_str_eq(v, want[i].value, "%s", want[i].name);
    }
    /* Without a list for NCCL, it gets the Gloo interface. */
    hvd_strvec_close(&env);
    hvd_strvec_init(&env);
    g.nccl_ifnames = NULL;
    cr_assert_eq(hvd_env_contract(&env, &p, &hl, 0, &g), 0);
    cr_expect_str_eq(hvd_strvec_getenv(&env, HVD_ENV_NCCL_SOCKET_IFNAME),
                     "eth1");
    hvd_strvec_close(&env);
    hvd_plan_close(&p);
    hvd_hostlist_close(&hl);
}

Test(env, gpu_pick_modulo_count)
{
    char out[16];
    cr_expect_eq(hvd_gpu_pick(NULL, 4, 5, out, sizeof(out)), 1);
    cr_expect_str_eq(out, "1");
    cr_expect_eq(hvd_gpu_pick("", 2, 0, out, sizeof(out)), 1);
    cr_expect_str_eq(out, "0");
    cr_expect_eq(hvd_gpu_pick(NULL, 0, 0, out, sizeof(out)), 0);
}

Test(env, gpu_pick_within_user_list)
{
    char out[16];
    cr_expect_eq(hvd_gpu_pick("5,7", 8, 0, out, sizeof(out)), 1);
    cr_expect_str_eq(out, "5");
    cr_expect_eq(hvd_gpu_pick("5,7", 8, 3, out, sizeof(out)), 1);
    cr_expect_str_eq(out, "7");
    cr_expect_eq(hvd_gpu_pick("GPU-abc,GPU-def,2", 8, 2, out, sizeof(out)), 1);
    cr_expect_str_eq(out, "2");
    /* An empty entry is not a device. */
    cr_expect_eq(hvd_gpu_pick("1,,2", 8, 1, out, sizeof(out)), 0);
    /* No GPUs on the host: nothing to pin whatever the list says. */
    cr_expect_eq(hvd_gpu_pick("5,7", 0, 1, out, sizeof(out)), 0);
}

Test(env, gpu_count_test_hook)
{
    setenv(HVD_ENV_TEST_GPUS, "3", 1);
    cr_expect_eq(hvd_gpu_count(), 3);
    setenv(HVD_ENV_TEST_GPUS, "junk", 1);
    cr_expect_eq(hvd_gpu_count(), 0);
    unsetenv(HVD_ENV_TEST_GPUS);
}
