/* Error codes shared by every role: the table in libhvd's public header. */
#ifndef HVD_ERR_H
#define HVD_ERR_H

#include "worker/include/hvd.h"

#endif
