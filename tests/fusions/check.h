/* check.h: what the C checks of tests/ (relu_fusion_check.c,
 * pool_col_plan_check.c) share. */
#ifndef CNN_TESTS_CHECK_H
#define CNN_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "cnn.h"

/* expr, an entry or Net call, must succeed; else the message and exit 2 */
#define CHECK(expr)                                                                    \
    do {                                                                               \
        if ((expr) != CNN_OK) {                                                        \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr,       \
                    cnn_last_error());                                                 \
            exit(2);                                                                   \
        }                                                                              \
    } while (0)

#endif
