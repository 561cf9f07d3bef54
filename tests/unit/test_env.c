/* Unit tests for the env contract and GPU choice (launcher/lib/env.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/lib/env.h"
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

/* Every call of a sink, recorded. */
struct calls {
    const char *name[32];
    char value[32][64];
    int given[32];
    int n;
};

static int record(void *ctx, const char *name, const char *value)
{
    struct calls *c = ctx;
    cr_assert_lt(c->n, 32);
    c->name[c->n] = name;
    c->given[c->n] = value != NULL;
    snprintf(c->value[c->n], sizeof(c->value[0]), "%s", value ? value : "");
    c->n++;
    return 0;
}

/* Walks pl through the strvec sink and the process sink and checks that
 * both hold what the table gave, for every name it gave. */
static void both_sinks(const struct hvd_env_place *pl, struct calls *c)
{
    struct hvd_strvec env;
    size_t given = 0;

    hvd_strvec_init(&env);
    cr_assert_eq(hvd_env_place_put(pl, record, c), 0);
    cr_assert_eq(hvd_env_place_put(pl, hvd_env_put_strvec, &env), 0);
    cr_assert_eq(hvd_env_place_put(pl, hvd_env_put_process, NULL), 0);
    for (int i = 0; i < c->n; i++) {
        const char *sv = hvd_strvec_getenv(&env, c->name[i]);
        const char *pv = getenv(c->name[i]);
        if (!c->given[i]) {
            cr_expect_null(sv, "%s in the strvec", c->name[i]);
            cr_expect_null(pv, "%s in the environment", c->name[i]);
            continue;
        }
        given++;
        cr_assert_not_null(sv, "%s missing from the strvec", c->name[i]);
        cr_assert_not_null(pv, "%s missing from the environment", c->name[i]);
        cr_expect_str_eq(sv, c->value[i], "%s", c->name[i]);
        cr_expect_str_eq(pv, c->value[i], "%s", c->name[i]);
    }
    cr_expect_eq(env.n, given);
    hvd_strvec_close(&env);
}

static const char *value_of(const struct calls *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->name[i], name) == 0)
            return c->given[i] ? c->value[i] : NULL;
    cr_assert_fail("%s not in the table", name);
    return NULL;
}

/* horovodrun's ranks (a strvec) and hvd-mpi-rank's (setenv) get the same
 * per-rank variables from one table. */
Test(env, place_same_through_both_sinks)
{
    const struct hvd_env_place pl = {
        .rank = 5,
        .size = 8,
        .local_rank = 1,
        .local_size = 3,
        .cross_rank = 2,
        .cross_size = 4,
        .host = "node-b",
    };
    struct calls c = {0};

    both_sinks(&pl, &c);
    cr_expect_eq(c.n, 11);
    cr_expect_str_eq(value_of(&c, HVD_ENV_RANK), "5");
    cr_expect_str_eq(value_of(&c, HVD_ENV_SIZE), "8");
    cr_expect_str_eq(value_of(&c, HVD_ENV_LOCAL_RANK), "1");
    cr_expect_str_eq(value_of(&c, HVD_ENV_LOCAL_SIZE), "3");
    cr_expect_str_eq(value_of(&c, HVD_ENV_CROSS_RANK), "2");
    cr_expect_str_eq(value_of(&c, HVD_ENV_CROSS_SIZE), "4");
    cr_expect_str_eq(value_of(&c, HVD_ENV_HOSTNAME), "node-b");
    cr_expect_str_eq(value_of(&c, "RANK"), "5");
    cr_expect_str_eq(value_of(&c, "WORLD_SIZE"), "8");
    cr_expect_str_eq(value_of(&c, "LOCAL_RANK"), "1");
    cr_expect_str_eq(value_of(&c, "LOCAL_WORLD_SIZE"), "3");
}

/* An unknown cross rank: not in the strvec, and unset in the process even
 * where an outer job had set it. */
Test(env, place_unknown_cross_rank)
{
    const struct hvd_env_place pl = {
        .rank = 0,
        .size = 2,
        .local_rank = 0,
        .local_size = 1,
        .cross_rank = -1,
        .host = "me",
    };
    struct calls c = {0};

    setenv(HVD_ENV_CROSS_RANK, "7", 1);
    setenv(HVD_ENV_CROSS_SIZE, "9", 1);
    setenv(HVD_ENV_RANK, "7", 1);
    both_sinks(&pl, &c);
    cr_expect_null(value_of(&c, HVD_ENV_CROSS_RANK));
    cr_expect_null(value_of(&c, HVD_ENV_CROSS_SIZE));
    cr_expect_null(getenv(HVD_ENV_CROSS_RANK));
    cr_expect_null(getenv(HVD_ENV_CROSS_SIZE));
    cr_expect_str_eq(getenv(HVD_ENV_RANK), "0");
    cr_expect_str_eq(value_of(&c, HVD_ENV_HOSTNAME), "me");
}

/* horovodrun's contract holds the table's variables for the rank's place
 * in the plan, plus its own. */
Test(env, contract_holds_the_table)
{
    struct hvd_hostlist hl;
    struct hvd_plan p;
    struct hvd_strvec env;
    struct calls c = {0};

    hvd_hostlist_init(&hl);
    cr_assert_eq(hvd_hostlist_parse_spec(&hl, "a:2,b:2", NULL, 0), 0);
    cr_assert_eq(hvd_plan_build(&p, &hl, 4), 0);
    hvd_strvec_init(&env);
    cr_assert_eq(hvd_env_contract(&env, &p, &hl, 3, &ep), 0);
    const struct hvd_env_place pl = {3, 4, 1, 2, 1, 2, "b"};
    cr_assert_eq(hvd_env_place_put(&pl, record, &c), 0);
    for (int i = 0; i < c.n; i++) {
        const char *v = hvd_strvec_getenv(&env, c.name[i]);
        cr_assert_not_null(v, "%s missing", c.name[i]);
        cr_expect_str_eq(v, c.value[i], "%s", c.name[i]);
    }
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
