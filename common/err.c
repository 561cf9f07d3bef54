/* Messages and names for the error table in hvd_err.h. */
#include "common/hvd_err.h"

const char *hvd_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
#define XX(name, val, msg)                                                     \
    case val:                                                                  \
        return msg;
        HVD_ERR_MAP(XX)
#undef XX
    }
    return "unknown error";
}

const char *hvd_err_name(int err)
{
    switch (err) {
    case 0:
        return "HVD_OK";
#define XX(name, val, msg)                                                     \
    case val:                                                                  \
        return "HVD_" #name;
        HVD_ERR_MAP(XX)
#undef XX
    }
    return "HVD_EUNKNOWN";
}
