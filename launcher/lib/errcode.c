/* Messages and names of the launcher's error codes (errcode.h). */
#include "launcher/lib/errcode.h"

const char *hr_err_str(int err)
{
    switch (err) {
#define XX(name, val, msg)                                                     \
    case val:                                                                  \
        return msg;
        HR_ERRNO_MAP(XX)
#undef XX
    }
    return hvd_strerror(err);
}

const char *hr_err_name(int err)
{
    switch (err) {
#define XX(name, val, msg)                                                     \
    case val:                                                                  \
        return "HVD_" #name;
        HR_ERRNO_MAP(XX)
#undef XX
    }
    return hvd_err_name(err);
}
